//! Congestion control: how the window grows in congestion avoidance and how far it
//! falls on a loss. NewReno (RFC 5681) and CUBIC (RFC 9438, the default); BBR, which
//! does not react to loss this way, is `bbr`'s (the control block hands it the
//! window). Slow start,
//! fast recovery and the timeout response are the control block's, shared by both;
//! `HyStart` (RFC 9406) decides when the first slow start ends.

use crate::stats::TcpStat;
use dev::{Duration, Instant};

/// The algorithm a connection uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CongestionControl {
    NewReno,
    #[default]
    Cubic,
    /// BBR v1 (`tcp::bbr`), where the peer offers SACK; CUBIC where it does not.
    Bbr,
}

/// CUBIC's constants (RFC 9438 §4.1).
const C: f64 = 0.4;
const BETA: f64 = 0.7;

/// Per-connection state of the algorithm.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CcState {
    pub algo: CongestionControl,
    /// Window before the last reduction, in segments (W_max).
    w_max: f64,
    /// Time to reach `w_max` again from the reduced window (K), seconds.
    k: f64,
    /// When the current congestion-avoidance epoch began.
    epoch: Option<Instant>,
    /// The Reno-friendly estimate (W_est), in segments.
    w_est: f64,
    /// Window at the start of the epoch, segments.
    w_origin: f64,
}

impl CcState {
    pub fn new(algo: CongestionControl) -> Self {
        CcState {
            algo,
            w_max: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            w_origin: 0.0,
        }
    }

    /// The slow-start threshold after a congestion event, in bytes, given the window
    /// and the flight at the time.
    pub fn on_congestion(&mut self, cwnd: u32, flight: u32, mss: u32) -> u32 {
        match self.algo {
            // Not a loss-based window: BBR's own state keeps what to restore.
            CongestionControl::Bbr => u32::MAX,
            CongestionControl::NewReno => (flight / 2).max(2 * mss),
            CongestionControl::Cubic => {
                let w = f64::from(cwnd) / f64::from(mss.max(1));
                // Fast convergence (§4.7): release bandwidth to newer flows.
                self.w_max = if w < self.w_max {
                    w * (1.0 + BETA) / 2.0
                } else {
                    w
                };
                self.epoch = None;
                ((f64::from(cwnd) * BETA) as u32).max(2 * mss)
            }
        }
    }

    /// The window falls to the restart window after idle (RFC 5681 §4.1) from
    /// `cwnd`: CUBIC's epoch begins again when avoidance does, with `cwnd` as
    /// its W_max if larger (FreeBSD's `cubic_after_idle`), so the idle time does
    /// not count as time spent growing.
    pub fn after_idle(&mut self, cwnd: u32, mss: u32) {
        if self.algo == CongestionControl::Cubic {
            self.w_max = self.w_max.max(f64::from(cwnd) / f64::from(mss.max(1)));
        }
        self.epoch = None;
    }

    /// A timeout: the epoch restarts from the collapsed window.
    pub fn on_timeout(&mut self) {
        self.epoch = None;
    }

    /// Window growth in congestion avoidance for `acked` new bytes, in bytes.
    pub fn avoid(&mut self, now: Instant, cwnd: u32, acked: u32, mss: u32, srtt: Duration) -> u32 {
        let mss = mss.max(1);
        match self.algo {
            CongestionControl::NewReno | CongestionControl::Bbr => (mss * mss / cwnd.max(1)).max(1),
            CongestionControl::Cubic => {
                let segs = f64::from(cwnd) / f64::from(mss);
                let epoch = *self.epoch.get_or_insert_with(|| {
                    if segs < self.w_max {
                        self.k = ((self.w_max - segs) / C).cbrt();
                        self.w_origin = self.w_max;
                    } else {
                        self.k = 0.0;
                        self.w_origin = segs;
                    }
                    self.w_est = segs;
                    now
                });
                let t = now.saturating_duration_since(epoch) + srtt;
                let target = self.w_cubic(t.as_secs_f64()).clamp(segs, 1.5 * segs);
                // Reno-friendly region (§4.3): never grow slower than Reno would.
                let alpha = 3.0 * (1.0 - BETA) / (1.0 + BETA);
                self.w_est += alpha * f64::from(acked) / f64::from(cwnd.max(1));
                let goal = target.max(self.w_est);
                let inc = ((goal - segs) / segs) * f64::from(acked);
                (inc.max(0.0) as u32).min(acked)
            }
        }
    }

    /// W_cubic(t) in segments.
    fn w_cubic(&self, t: f64) -> f64 {
        C * (t - self.k).powi(3) + self.w_origin
    }
}

/// HyStart++ (RFC 9406): the connection's first slow start ends when the round-trip
/// time starts to grow, a queue filling somewhere on the path, rather than when a
/// window twice too large has overflowed it. RFC 9438 §4.10 recommends it for CUBIC.
///
/// Rounds of one flight each (a round ends with the ACK of what was sent when it
/// began, `windowEnd`) keep the smallest RTT sample seen in them. Once a round has
/// [`N_RTT_SAMPLE`] samples and its minimum exceeds the last round's by a threshold
/// (an eighth of it, kept between 4 and 16 ms), slow start turns into Conservative
/// Slow Start: the window grows a quarter as fast, for [`CSS_ROUNDS`] rounds, after
/// which congestion avoidance takes over (`ssthresh = cwnd`). If the RTT falls back
/// below where CSS began, the rise was jitter and slow start resumes. A loss at any
/// point ends it all with the usual response. Used only for the first slow start
/// (§4.3); after a timeout the window grows as RFC 5681 has it, since `ssthresh`
/// then holds what the path was found to take.
///
/// Not paced, so an ACK grows the window by at most `L` = 8 segments (§4.3; RFC
/// 5681's one segment per ACK held back a sender whose peer acknowledges 64 KiB
/// segments of segmentation offload with one ACK each).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HyStart {
    phase: Phase,
    /// The sequence number whose acknowledgment ends the round (`windowEnd`);
    /// `None` before the first round.
    window_end: Option<u32>,
    /// Smallest RTT of the last round and of this one, in microseconds
    /// (`u32::MAX`: none yet).
    last_round_min: u32,
    round_min: u32,
    /// RTT samples this round (saturating).
    samples: u8,
    /// The round minimum that started CSS (`cssBaselineMinRtt`).
    css_baseline: u32,
    /// Rounds completed in CSS.
    css_rounds: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not in use: off by configuration, or after the first slow start.
    Off,
    SlowStart,
    Css,
}

/// How an ACK that arrives in slow start grows the window (see [`HyStart::on_ack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlowStartAck {
    /// RFC 5681: by what it acknowledges, at most one segment.
    Standard,
    /// By what it acknowledges, at most `L` segments.
    Grow,
    /// A quarter of [`SlowStartAck::Grow`] (Conservative Slow Start).
    Conservative,
    /// CSS is over: congestion avoidance from the current window on.
    EnterAvoidance,
}

impl SlowStartAck {
    /// What an ACK of `acked` new bytes adds to the window, in bytes (RFC 9406
    /// §4.2: with HyStart++, up to `L` segments, a quarter of that in CSS; without,
    /// RFC 5681's one).
    ///
    /// A stretch ACK, one for more than two segments (our receiver's one ACK a
    /// receive burst, a Linux receiver's after GRO), counts as the ACKs of every
    /// second segment it stands for (RFC 1122's delayed ACKs), each with its own
    /// limit. Capped per ACK, one ACK a round would grow the window by `L`
    /// segments a round instead of doubling it: slow start turned linear, and a
    /// 256 MiB transfer between two stacks in one thread spent its first 1.4 ms
    /// there. Linux counts stretch ACKs in full the same way (`tcp_slow_start`,
    /// since its stretch-ACK fixes of 2015).
    pub fn growth(self, acked: u32, mss: u32) -> u32 {
        let mss = mss.max(1);
        let acks = acked.div_ceil(mss.saturating_mul(2)).max(1);
        let per = |segs: u32| acked.min(acks.saturating_mul(segs).saturating_mul(mss));
        match self {
            SlowStartAck::Standard => per(1),
            SlowStartAck::Grow => per(L_SEGMENTS),
            SlowStartAck::Conservative => per(L_SEGMENTS) / CSS_GROWTH_DIVISOR,
            SlowStartAck::EnterAvoidance => 0,
        }
    }
}

/// RFC 9406 §4.3's constants.
const MIN_RTT_THRESH_US: u32 = 4_000;
const MAX_RTT_THRESH_US: u32 = 16_000;
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u8 = 8;
const CSS_GROWTH_DIVISOR: u32 = 4;
const CSS_ROUNDS: u8 = 5;
/// `L` for a sender that does not pace.
const L_SEGMENTS: u32 = 8;

impl HyStart {
    pub fn new(enabled: bool) -> Self {
        HyStart {
            phase: if enabled {
                Phase::SlowStart
            } else {
                Phase::Off
            },
            window_end: None,
            last_round_min: u32::MAX,
            round_min: u32::MAX,
            samples: 0,
            css_baseline: u32::MAX,
            css_rounds: 0,
        }
    }

    /// An RTT sample (one per ACK that gives one).
    pub fn on_rtt(&mut self, rtt: Duration) {
        if self.phase == Phase::Off {
            return;
        }
        let us = u32::try_from(rtt.as_micros()).unwrap_or(u32::MAX - 1);
        self.round_min = self.round_min.min(us);
        self.samples = self.samples.saturating_add(1);
    }

    /// An ACK of new data while `cwnd < ssthresh`, outside recovery, after its RTT
    /// sample went to [`HyStart::on_rtt`]. `ack` is its acknowledgment number and
    /// `snd_nxt` the next sequence number to send. Says how the window grows.
    pub fn on_ack(&mut self, ack: u32, snd_nxt: u32, st: &mut TcpStat) -> SlowStartAck {
        if self.phase == Phase::Off {
            return SlowStartAck::Standard;
        }
        // RFC 9406 §4.2: the delay check, once the round has enough samples (each
        // of which set `round_min`).
        let enough = self.samples >= N_RTT_SAMPLE;
        match self.phase {
            Phase::SlowStart if enough && self.last_round_min != u32::MAX => {
                let thresh = (self.last_round_min / MIN_RTT_DIVISOR)
                    .clamp(MIN_RTT_THRESH_US, MAX_RTT_THRESH_US);
                if self.round_min >= self.last_round_min.saturating_add(thresh) {
                    self.phase = Phase::Css;
                    self.css_baseline = self.round_min;
                    self.css_rounds = 0;
                    st.hystartcss += 1;
                }
            }
            Phase::Css if enough && self.round_min < self.css_baseline => {
                // The rise did not last: jitter, not a queue. Back to slow start.
                self.phase = Phase::SlowStart;
                self.css_baseline = u32::MAX;
                st.hystartresume += 1;
            }
            _ => {}
        }
        // A round ends with the ACK of what was sent when it began.
        let round_over = self
            .window_end
            .is_none_or(|end| ack.wrapping_sub(end) as i32 >= 0);
        if round_over {
            self.window_end = Some(snd_nxt);
            self.last_round_min = self.round_min;
            self.round_min = u32::MAX;
            self.samples = 0;
            if self.phase == Phase::Css {
                self.css_rounds += 1;
                if self.css_rounds >= CSS_ROUNDS {
                    self.phase = Phase::Off;
                    st.hystartca += 1;
                    return SlowStartAck::EnterAvoidance;
                }
            }
        }
        match self.phase {
            Phase::Css => SlowStartAck::Conservative,
            _ => SlowStartAck::Grow,
        }
    }

    /// A loss, a timeout or anything else that set `ssthresh`: slow start as RFC
    /// 5681 has it from now on.
    pub fn stop(&mut self) {
        self.phase = Phase::Off;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newreno_halves_the_flight_and_grows_one_segment_per_window() {
        let mut c = CcState::new(CongestionControl::NewReno);
        assert_eq!(c.on_congestion(100_000, 80_000, 1000), 40_000);
        assert_eq!(
            c.on_congestion(3000, 1000, 1000),
            2000,
            "at least two segments"
        );
        // One window's worth of ACKs adds about one segment.
        let mut cwnd = 20_000u32;
        for _ in 0..20 {
            cwnd += c.avoid(Instant::ZERO, cwnd, 1000, 1000, Duration::ZERO);
        }
        assert!((20_900..=21_000).contains(&cwnd), "{cwnd}");
    }

    #[test]
    fn cubic_reduces_by_beta_and_regrows_concave_then_convex() {
        let mss = 1000;
        let mut c = CcState::new(CongestionControl::Cubic);
        let ssthresh = c.on_congestion(100_000, 100_000, mss);
        assert_eq!(ssthresh, 70_000);
        // K = cbrt(W_max (1 - beta) / C) = cbrt(100 * 0.3 / 0.4) ≈ 4.2 s.
        let mut cwnd = ssthresh;
        let rtt = Duration::from_millis(100);
        let mut now = Instant::from_secs(10);
        let mut samples = Vec::new();
        for step in 0..120 {
            // One RTT: a window's worth of ACKs.
            let acks = cwnd / mss;
            for _ in 0..acks {
                cwnd += c.avoid(now, cwnd, mss, mss, rtt);
            }
            now += rtt;
            if step % 10 == 0 {
                samples.push(cwnd);
            }
        }
        assert!((4.1..4.3).contains(&c.k), "K = {}", c.k);
        // Concave: fast at first, slowing towards W_max = 100 segments...
        let growth: Vec<i64> = samples
            .windows(2)
            .map(|w| i64::from(w[1]) - i64::from(w[0]))
            .collect();
        assert!(growth[0] > growth[2], "{samples:?}");
        // ...around W_max near t = K...
        let at_k = samples[4];
        assert!((95_000..=105_000).contains(&at_k), "{samples:?}");
        // ...then convex: probing beyond it faster and faster.
        assert!(growth[8] > growth[5], "{samples:?}");
        assert!(*samples.last().unwrap() > 110_000, "{samples:?}");
    }

    #[test]
    fn cubic_fast_convergence_lowers_w_max() {
        let mut c = CcState::new(CongestionControl::Cubic);
        c.on_congestion(100_000, 100_000, 1000);
        c.on_congestion(80_000, 80_000, 1000);
        assert!((c.w_max - 80.0 * 1.7 / 2.0).abs() < 1e-9);
    }
}

#[cfg(test)]
mod hystart_tests {
    use super::*;

    #[test]
    fn a_stretch_ack_grows_the_window_as_the_acks_it_stands_for() {
        let mss = 1000;
        // One or two segments: RFC 5681's one, RFC 9406's up to L.
        assert_eq!(SlowStartAck::Standard.growth(1000, mss), 1000);
        assert_eq!(SlowStartAck::Standard.growth(2000, mss), 1000);
        assert_eq!(SlowStartAck::Grow.growth(2000, mss), 2000);
        assert_eq!(SlowStartAck::Conservative.growth(2000, mss), 500);
        // 45 segments at once: 23 ACKs of a delayed-ACK receiver.
        assert_eq!(SlowStartAck::Standard.growth(45_000, mss), 23_000);
        assert_eq!(SlowStartAck::Grow.growth(45_000, mss), 45_000);
        assert_eq!(SlowStartAck::Conservative.growth(45_000, mss), 11_250);
        assert_eq!(SlowStartAck::EnterAvoidance.growth(45_000, mss), 0);
        // No overflow at the extremes.
        assert_eq!(SlowStartAck::Grow.growth(u32::MAX, 1), u32::MAX);
        assert_eq!(SlowStartAck::Standard.growth(0, mss), 0);
    }

    /// A sender in slow start: each ACK acknowledges one more 1000-byte segment and
    /// lets one more go, so a round is one flight of `flight` segments.
    struct Flow {
        h: HyStart,
        st: TcpStat,
        acked: u32,
        flight: u32,
    }

    impl Flow {
        /// The first ACK starts the first round; [`Flow::round`] is one from then on.
        fn new(flight: u32) -> Flow {
            let mut f = Flow {
                h: HyStart::new(true),
                st: TcpStat::default(),
                acked: 0,
                flight,
            };
            // Without an RTT sample (the handshake's would be the first).
            f.acked += 1000;
            f.h.on_ack(f.acked, f.acked + flight * 1000, &mut f.st);
            f
        }

        /// `n` ACKs, each with an RTT sample of `rtt_ms`; what the last said.
        fn acks(&mut self, n: u32, rtt_ms: f64) -> SlowStartAck {
            let mut last = SlowStartAck::Standard;
            for _ in 0..n {
                self.acked += 1000;
                self.h.on_rtt(Duration::from_secs_f64(rtt_ms / 1000.0));
                last = self
                    .h
                    .on_ack(self.acked, self.acked + self.flight * 1000, &mut self.st);
            }
            last
        }

        /// One whole round (a flight's ACKs) at `rtt_ms`.
        fn round(&mut self, rtt_ms: f64) -> SlowStartAck {
            self.acks(self.flight, rtt_ms)
        }
    }

    #[test]
    fn slow_start_goes_on_while_the_rtt_holds() {
        let mut f = Flow::new(16);
        for _ in 0..10 {
            assert_eq!(f.round(20.0), SlowStartAck::Grow);
        }
        // Jitter within the threshold (an eighth of 20 ms is below the 4 ms floor).
        assert_eq!(f.round(23.5), SlowStartAck::Grow);
        assert_eq!(f.st.hystartcss, 0);
    }

    #[test]
    fn a_rising_rtt_turns_slow_start_conservative_then_into_avoidance() {
        let mut f = Flow::new(16);
        f.round(20.0);
        f.round(20.0);
        // The minimum rises by the 4 ms threshold: CSS from the eighth sample on.
        assert_eq!(
            f.acks(7, 24.0),
            SlowStartAck::Grow,
            "seven samples are not enough"
        );
        assert_eq!(f.acks(1, 24.0), SlowStartAck::Conservative);
        assert_eq!(f.st.hystartcss, 1);
        // CSS_ROUNDS rounds later (the one it began in counts), congestion avoidance.
        let mut seen = Vec::new();
        for _ in 0..CSS_ROUNDS + 1 {
            for _ in 0..f.flight {
                seen.push(f.acks(1, 25.0));
            }
        }
        let end = seen
            .iter()
            .position(|a| *a == SlowStartAck::EnterAvoidance)
            .expect("CSS ends");
        assert!(seen[..end].iter().all(|a| *a == SlowStartAck::Conservative));
        assert_eq!(f.st.hystartca, 1);
        // And it is done with: slow start (after a timeout) is RFC 5681's again.
        assert_eq!(f.round(20.0), SlowStartAck::Standard);
    }

    #[test]
    fn an_rtt_that_falls_back_resumes_slow_start() {
        let mut f = Flow::new(16);
        f.round(40.0);
        f.round(40.0);
        // 40 ms: the threshold is an eighth, 5 ms.
        assert_eq!(f.acks(8, 45.0), SlowStartAck::Conservative);
        f.acks(f.flight - 8, 45.0);
        // The next round's minimum falls below CSS's baseline: jitter, not a queue.
        assert_eq!(f.acks(7, 45.0), SlowStartAck::Conservative);
        assert_eq!(f.acks(1, 41.0), SlowStartAck::Grow);
        assert_eq!((f.st.hystartcss, f.st.hystartresume), (1, 1));
        // And a rise below the threshold does not bring CSS back.
        f.acks(f.flight - 8, 41.0);
        assert_eq!(f.round(45.0), SlowStartAck::Grow, "4 ms is below 41/8");
        assert_eq!(f.st.hystartcss, 1);
    }

    #[test]
    fn the_threshold_is_an_eighth_of_the_rtt_between_4_and_16_ms() {
        for (base, rise, css) in [
            (10.0, 3.9, false),
            (10.0, 4.0, true),
            (80.0, 9.9, false),
            (80.0, 10.0, true),
            (400.0, 15.9, false),
            (400.0, 16.0, true),
        ] {
            let mut f = Flow::new(16);
            f.round(base);
            f.round(base);
            let got = f.round(base + rise) == SlowStartAck::Conservative;
            assert_eq!(got, css, "base {base} ms, rise {rise} ms");
        }
    }

    #[test]
    fn off_or_stopped_it_leaves_slow_start_to_rfc_5681() {
        let mut st = TcpStat::default();
        let mut h = HyStart::new(false);
        h.on_rtt(Duration::from_millis(10));
        assert_eq!(h.on_ack(1000, 20_000, &mut st), SlowStartAck::Standard);
        let mut f = Flow::new(16);
        f.round(20.0);
        f.h.stop();
        assert_eq!(f.round(20.0), SlowStartAck::Standard);
    }
}
