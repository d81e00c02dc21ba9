//! BBR, version 1 (draft-cardwell-iccrg-bbr-congestion-control-00; Linux's
//! `tcp_bbr.c`): a congestion control that models the path instead of reacting to
//! loss. From the delivery-rate samples of every ACK ([`RateSample`], taken by the
//! sender's scoreboard) it keeps the bottleneck bandwidth (the largest rate of the
//! last ten rounds) and the round-trip propagation time (the smallest RTT of the
//! last ten seconds); it paces at a gain times the bandwidth and bounds what is in
//! flight by a gain times their product (BDP). Random loss does not shrink the
//! model, which is why BBR keeps its rate where CUBIC halves it per loss.
//!
//! The modes: STARTUP doubles the rate each round (gain 2/ln 2) until the
//! bandwidth has not grown by a quarter for three rounds; DRAIN empties the queue
//! that made; PROBE_BW cycles its pacing gain through 1.25, 0.75 and six rounds
//! of 1 (probing for more bandwidth, then draining what the probe queued);
//! PROBE_RTT, when the minimum RTT is ten seconds old, holds four segments in
//! flight for 200 ms and a round so that the queue empties and the minimum is
//! measured again. During fast recovery the window follows packet conservation
//! for a round (what was delivered may be sent), and is restored when recovery
//! ends; a timeout collapses it to one segment as for every algorithm, and it is
//! restored when the timeout's recovery ends.
//!
//! Not here (BBR v1's rarer parts): the long-term bandwidth sampling that detects
//! token-bucket policers, and the ACK-aggregation allowance (BBR v2's `extra_acked`).
//! BBR needs the SACK scoreboard for its samples; a connection whose peer does not
//! offer SACK uses CUBIC instead.

use dev::{Duration, Instant};

/// What one ACK says of the delivery rate (draft-cheng-iccrg-delivery-rate-
/// estimation): `delivered` bytes over `interval`, from the most recently sent
/// segment it delivered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RateSample {
    /// Bytes delivered between that segment's send and this ACK.
    pub delivered: u64,
    /// The longer of the send and the ACK intervals; `None` when shorter than the
    /// minimum RTT (the ACKs were compressed: no rate to believe).
    pub interval: Option<Duration>,
    /// The connection's delivered bytes when that segment was sent (BBR's rounds).
    pub prior_delivered: u64,
    /// It was sent while the application, not the network, held the sender back.
    pub app_limited: bool,
    /// Its round trip, unless it was a retransmission.
    pub rtt: Option<Duration>,
}

impl RateSample {
    /// Bytes per second, if the sample has a rate.
    pub fn rate(&self) -> Option<f64> {
        let i = self.interval?.as_secs_f64();
        (i > 0.0).then(|| self.delivered as f64 / i)
    }
}

/// STARTUP's gains, 2/ln 2: the smallest that doubles the delivery rate each round.
const HIGH_GAIN: f64 = 2.885;
const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// PROBE_BW's window gain: two BDPs, room for delayed and stretched ACKs.
const CWND_GAIN: f64 = 2.0;
/// PROBE_BW's pacing gains, one phase a minimum RTT.
const PACING_GAIN: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Rounds the bandwidth filter remembers.
const BW_ROUNDS: u64 = 10;
/// How long a minimum RTT is believed.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// PROBE_RTT's stay at [`MIN_CWND_SEGS`].
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// The window never falls below four segments (but in a timeout).
const MIN_CWND_SEGS: u32 = 4;
/// STARTUP ends when the bandwidth grew by less than a quarter in three rounds.
const FULL_BW_GROWTH: f64 = 1.25;
const FULL_BW_ROUNDS: u8 = 3;
/// Pacing a percent below the estimate, so the bottleneck's queue drains.
const PACING_MARGIN: f64 = 0.99;
/// The window before there is a minimum RTT to size it with.
const INIT_CWND_SEGS: u32 = 10;

/// BBR's state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrMode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// The connection's loss state, as BBR sees it (Linux's `icsk_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CaState {
    Open,
    /// Fast recovery.
    Recovery,
    /// Recovering from a retransmission timeout.
    Loss,
}

/// An ACK, as BBR needs it. Bytes throughout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BbrAck {
    pub now: Instant,
    pub rs: Option<RateSample>,
    /// Newly acknowledged or SACKed.
    pub acked_sacked: u32,
    /// Newly marked lost.
    pub losses: u32,
    /// In flight (the pipe) before and after the ACK.
    pub prior_inflight: u32,
    pub inflight: u32,
    /// Delivered over the connection's life, after the ACK.
    pub delivered: u64,
    /// Data bytes per segment.
    pub mss: u32,
    pub state: CaState,
    pub srtt: Option<Duration>,
}

/// A windowed maximum over rounds, with three samples (Kathleen Nichols' algorithm,
/// Linux's `win_minmax`): the best, second best and third best of successive
/// thirds of the window.
#[derive(Clone, Copy, Debug, Default)]
struct MaxFilter {
    s: [(u64, f64); 3],
}

impl MaxFilter {
    fn get(&self) -> f64 {
        self.s[0].1
    }

    fn update(&mut self, win: u64, t: u64, v: f64) {
        let new = (t, v);
        if v >= self.s[0].1 || t.saturating_sub(self.s[2].0) > win {
            self.s = [new; 3];
            return;
        }
        if v >= self.s[1].1 {
            self.s[1] = new;
            self.s[2] = new;
        } else if v >= self.s[2].1 {
            self.s[2] = new;
        }
        // The best is older than the window: the others move up.
        let dt = t.saturating_sub(self.s[0].0);
        if dt > win {
            self.s = [self.s[1], self.s[2], new];
            if t.saturating_sub(self.s[0].0) > win {
                self.s = [self.s[1], self.s[2], new];
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            // A quarter of the window without a second best: take one.
            self.s[1] = new;
            self.s[2] = new;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = new;
        }
    }
}

/// Per-connection BBR state.
#[derive(Clone, Debug)]
pub(crate) struct Bbr {
    mode: BbrMode,
    /// Bottleneck bandwidth, bytes per second, over [`BW_ROUNDS`] rounds.
    bw: MaxFilter,
    /// Rounds so far, and the delivered count that ends this one.
    rounds: u64,
    next_round_dlv: u64,
    round_start: bool,
    min_rtt: Option<Duration>,
    min_rtt_at: Instant,
    /// PROBE_RTT: when its 200 ms end, and whether a round has passed too.
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    /// STARTUP's plateau detection.
    full_bw: f64,
    full_bw_cnt: u8,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_at: Instant,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// The window before recovery, a timeout or PROBE_RTT, to restore after.
    prior_cwnd: u32,
    packet_conservation: bool,
    prev_state: CaState,
    /// Sending restarted after the application went idle.
    idle_restart: bool,
    /// Bytes per second.
    pacing_rate: f64,
    has_seen_rtt: bool,
    /// PROBE_BW's first phase is chosen at random (seeded, so runs repeat).
    rng: u32,
}

impl Bbr {
    /// A connection that starts with `cwnd` bytes of window.
    pub fn new(seed: u32, cwnd: u32) -> Bbr {
        let mut b = Bbr {
            mode: BbrMode::Startup,
            bw: MaxFilter::default(),
            rounds: 0,
            next_round_dlv: 0,
            round_start: false,
            min_rtt: None,
            min_rtt_at: Instant::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            full_bw: 0.0,
            full_bw_cnt: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_at: Instant::ZERO,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            prior_cwnd: 0,
            packet_conservation: false,
            prev_state: CaState::Open,
            idle_restart: false,
            pacing_rate: 0.0,
            has_seen_rtt: false,
            rng: seed | 1,
        };
        // Before any RTT: as if it were a millisecond.
        b.pacing_rate = HIGH_GAIN * f64::from(cwnd) / 1e-3;
        b
    }

    pub fn mode(&self) -> BbrMode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes per second.
    pub fn bw(&self) -> f64 {
        self.bw.get()
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The pacing rate, bytes per second.
    pub fn pacing_rate(&self) -> u64 {
        self.pacing_rate as u64
    }

    /// In PROBE_RTT the sender's samples are app-limited (it holds back on purpose).
    pub fn in_probe_rtt(&self) -> bool {
        self.mode == BbrMode::ProbeRtt
    }

    /// Sending starts again after the application left the connection idle.
    pub fn on_restart_from_idle(&mut self, app_limited: bool) {
        if app_limited {
            self.idle_restart = true;
            if self.mode == BbrMode::ProbeBw {
                // Back at the estimated rate at once, not at a probe's gain.
                self.pacing_rate = self.bw() * PACING_MARGIN;
            }
        }
    }

    /// Data bytes a burst of segmentation offload should hold: about a
    /// millisecond at the pacing rate, two segments at least (Linux's
    /// `bbr_tso_segs_goal`).
    pub fn tso_segs(&self, mss: u32) -> u32 {
        let mss = mss.max(1);
        let bytes = (self.pacing_rate / 1000.0).min(65_536.0) as u32;
        (bytes / mss).clamp(2, 127)
    }

    /// Fast recovery or a timeout begins: remember the window to restore.
    pub fn on_congestion(&mut self, cwnd: u32) {
        self.save_cwnd(cwnd);
    }

    /// A retransmission timeout: like the end of a round, and the plateau
    /// detection starts again.
    pub fn on_rto(&mut self, cwnd: u32) {
        self.save_cwnd(cwnd);
        self.prev_state = CaState::Loss;
        self.full_bw = 0.0;
        self.round_start = true;
    }

    fn save_cwnd(&mut self, cwnd: u32) {
        if self.prev_state < CaState::Recovery && self.mode != BbrMode::ProbeRtt {
            self.prior_cwnd = cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(cwnd);
        }
    }

    /// An ACK: the model is updated from its sample, then the pacing rate and the
    /// window (`cwnd`, bytes) follow from it.
    pub fn on_ack(&mut self, a: &BbrAck, cwnd: &mut u32) {
        self.update_bw(a);
        self.update_cycle_phase(a);
        self.check_full_bw_reached(a);
        self.check_drain(a);
        self.update_min_rtt(a, cwnd);
        self.set_pacing_rate(a, *cwnd);
        self.set_cwnd(a, cwnd);
    }

    fn update_bw(&mut self, a: &BbrAck) {
        self.round_start = false;
        let Some(rs) = a.rs else { return };
        let Some(rate) = rs.rate() else { return };
        if rs.prior_delivered >= self.next_round_dlv {
            self.next_round_dlv = a.delivered;
            self.rounds += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        // An app-limited sample says only that the path takes at least that much.
        if !rs.app_limited || rate >= self.bw() {
            self.bw.update(BW_ROUNDS, self.rounds, rate);
        }
    }

    /// Bytes in flight that `gain` times the BDP makes, with the allowance for
    /// offload bursts and delayed ACKs (Linux's `bbr_inflight` and
    /// `bbr_quantization_budget`).
    fn inflight(&self, gain: f64, mss: u32) -> u32 {
        let mss = mss.max(1);
        let bdp = match self.min_rtt {
            None => INIT_CWND_SEGS * mss,
            Some(m) => (self.bw() * m.as_secs_f64() * gain).min(f64::from(u32::MAX / 2)) as u32,
        };
        let segs = bdp.div_ceil(mss) + 3 * self.tso_segs(mss);
        let mut segs = segs.next_multiple_of(2);
        if self.mode == BbrMode::ProbeBw && self.cycle_idx == 0 {
            segs += 2;
        }
        segs.saturating_mul(mss)
    }

    fn update_cycle_phase(&mut self, a: &BbrAck) {
        if self.mode == BbrMode::ProbeBw && self.next_cycle_phase(a) {
            self.advance_cycle(a.now);
        }
    }

    fn next_cycle_phase(&self, a: &BbrAck) -> bool {
        let full_length = self
            .min_rtt
            .is_some_and(|m| a.now.saturating_duration_since(self.cycle_at) > m);
        let gain = self.pacing_gain;
        if gain == 1.0 {
            return full_length;
        }
        if gain > 1.0 {
            // Probing: until a loss or the extra is actually in flight.
            return full_length && (a.losses > 0 || a.prior_inflight >= self.inflight(gain, a.mss));
        }
        // Draining: ends early once the queue is gone.
        full_length || a.prior_inflight <= self.inflight(1.0, a.mss)
    }

    fn advance_cycle(&mut self, now: Instant) {
        self.cycle_idx = (self.cycle_idx + 1) % PACING_GAIN.len();
        self.cycle_at = now;
        self.pacing_gain = PACING_GAIN[self.cycle_idx];
    }

    fn check_full_bw_reached(&mut self, a: &BbrAck) {
        if self.full_bw_reached || !self.round_start || a.rs.is_none_or(|r| r.app_limited) {
            return;
        }
        if self.bw() >= self.full_bw * FULL_BW_GROWTH {
            self.full_bw = self.bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_ROUNDS;
    }

    fn check_drain(&mut self, a: &BbrAck) {
        if self.mode == BbrMode::Startup && self.full_bw_reached {
            self.mode = BbrMode::Drain;
            self.pacing_gain = DRAIN_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
        if self.mode == BbrMode::Drain && a.inflight <= self.inflight(1.0, a.mss) {
            self.enter_probe_bw(a.now);
        }
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = BbrMode::ProbeBw;
        self.cwnd_gain = CWND_GAIN;
        // A random phase, but never the draining one (1) first.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 17;
        self.rng ^= self.rng << 5;
        let r = (self.rng % 7) as usize;
        self.cycle_idx = PACING_GAIN.len() - 1 - r;
        self.advance_cycle(now);
    }

    fn enter_startup(&mut self) {
        self.mode = BbrMode::Startup;
        self.pacing_gain = HIGH_GAIN;
        self.cwnd_gain = HIGH_GAIN;
    }

    fn update_min_rtt(&mut self, a: &BbrAck, cwnd: &mut u32) {
        let expired = self.min_rtt.is_some() && a.now > self.min_rtt_at + MIN_RTT_WINDOW;
        if let Some(rtt) = a.rs.and_then(|r| r.rtt) {
            if self.min_rtt.is_none_or(|m| rtt < m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_at = a.now;
            }
        }
        if expired && !self.idle_restart && self.mode != BbrMode::ProbeRtt {
            self.mode = BbrMode::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            self.save_cwnd(*cwnd);
            self.probe_rtt_done = None;
        }
        if self.mode == BbrMode::ProbeRtt {
            match self.probe_rtt_done {
                None if a.inflight <= MIN_CWND_SEGS * a.mss => {
                    self.probe_rtt_done = Some(a.now + PROBE_RTT_TIME);
                    self.probe_rtt_round_done = false;
                    self.next_round_dlv = a.delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && a.now >= done {
                        self.min_rtt_at = a.now;
                        *cwnd = (*cwnd).max(self.prior_cwnd);
                        if self.full_bw_reached {
                            self.enter_probe_bw(a.now);
                        } else {
                            self.enter_startup();
                        }
                    }
                }
            }
        }
        if a.rs.is_some_and(|r| r.delivered > 0) {
            self.idle_restart = false;
        }
    }

    fn set_pacing_rate(&mut self, a: &BbrAck, cwnd: u32) {
        if !self.has_seen_rtt {
            // The first RTT: the initial rate from the window over it.
            if let Some(rtt) = a.rs.and_then(|r| r.rtt).or(a.srtt) {
                let rtt = rtt.max(Duration::from_micros(1)).as_secs_f64();
                self.has_seen_rtt = true;
                self.pacing_rate = HIGH_GAIN * f64::from(cwnd) / rtt;
            }
        }
        let rate = self.pacing_gain * self.bw() * PACING_MARGIN;
        if rate > 0.0 && (self.full_bw_reached || rate > self.pacing_rate) {
            self.pacing_rate = rate;
        }
    }

    fn set_cwnd(&mut self, a: &BbrAck, cwnd: &mut u32) {
        let mss = a.mss.max(1);
        let mut c = *cwnd;
        if a.acked_sacked > 0 {
            if a.losses > 0 {
                c = c.saturating_sub(a.losses).max(mss);
            }
            if a.state == CaState::Recovery && self.prev_state != CaState::Recovery {
                // Recovery begins: packet conservation for a round.
                self.packet_conservation = true;
                self.next_round_dlv = a.delivered;
                c = a.inflight.saturating_add(a.acked_sacked);
            } else if self.prev_state >= CaState::Recovery && a.state < CaState::Recovery {
                // Recovery (or a timeout's) is over: the window from before it.
                c = c.max(self.prior_cwnd);
                self.packet_conservation = false;
            }
            self.prev_state = a.state;
            if self.packet_conservation {
                c = c.max(a.inflight.saturating_add(a.acked_sacked));
            } else {
                let target = self.inflight(self.cwnd_gain, mss);
                if self.full_bw_reached {
                    c = c.saturating_add(a.acked_sacked).min(target);
                } else if c < target || a.delivered < u64::from(INIT_CWND_SEGS * mss) {
                    c = c.saturating_add(a.acked_sacked);
                }
                c = c.max(MIN_CWND_SEGS * mss);
            }
        }
        if self.mode == BbrMode::ProbeRtt {
            c = c.min(MIN_CWND_SEGS * mss);
        }
        *cwnd = c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    /// A path of `rate` bytes a second and `rtt`, driven a round at a time: each
    /// round the sender sends its window (or what the path takes in an RTT, if
    /// less) and the ACKs of the previous round come back with a rate sample.
    struct Path {
        b: Bbr,
        cwnd: u32,
        now: Instant,
        delivered: u64,
        rate: f64,
        rtt: Duration,
    }

    impl Path {
        fn new(rate: f64, rtt: Duration) -> Path {
            Path {
                b: Bbr::new(7, 10 * MSS),
                cwnd: 10 * MSS,
                now: Instant::from_secs(1),
                delivered: 0,
                rate,
                rtt,
            }
        }

        /// One round: `loss` of the segments are lost (and counted so).
        fn round(&mut self, loss: f64) {
            let sent = f64::from(self.cwnd).min(self.rate * self.rtt.as_secs_f64()) as u64;
            let prior = self.delivered;
            // PROBE_RTT's flights are app-limited (the control block marks them).
            let app_limited = self.b.in_probe_rtt();
            // Ten ACKs a round.
            for i in 1..=10u64 {
                let part = sent / 10;
                let lost = (part as f64 * loss) as u64;
                let got = part - lost;
                self.delivered += got;
                let now = self.now + self.rtt * (i as u32) / 10;
                // Over the last round trip: a flight, less its losses.
                let rs = RateSample {
                    delivered: (part - lost) * 10,
                    interval: Some(self.rtt),
                    prior_delivered: prior,
                    app_limited,
                    rtt: Some(self.rtt),
                };
                let inflight = (sent - part * i) as u32;
                let a = BbrAck {
                    now,
                    rs: Some(rs),
                    acked_sacked: got as u32,
                    losses: lost as u32,
                    prior_inflight: inflight + part as u32,
                    inflight,
                    delivered: self.delivered,
                    mss: MSS,
                    state: CaState::Open,
                    srtt: Some(self.rtt),
                };
                self.b.on_ack(&a, &mut self.cwnd);
            }
            self.now += self.rtt;
        }
    }

    #[test]
    fn startup_finds_the_bandwidth_then_drains_and_probes() {
        // 100 MB/s, 10 ms: a BDP of 1 MB.
        let mut p = Path::new(100e6, Duration::from_millis(10));
        let mut rounds = 0;
        while p.b.mode() == BbrMode::Startup {
            p.round(0.0);
            rounds += 1;
            assert!(rounds < 40, "STARTUP never ended: bw {}", p.b.bw());
        }
        // Doubling from 10 segments to a 1 MB BDP takes about seven rounds, then
        // three without growth.
        assert!((8..=20).contains(&rounds), "{rounds} rounds");
        for _ in 0..20 {
            p.round(0.0);
        }
        assert_eq!(p.b.mode(), BbrMode::ProbeBw);
        let bw = p.b.bw();
        assert!((0.5e8..1.5e8).contains(&bw), "bw {bw}");
        // The window: two BDPs and the offload allowance.
        assert!((2_000_000..2_500_000).contains(&p.cwnd), "cwnd {}", p.cwnd);
        let pace = p.b.pacing_rate() as f64;
        assert!((0.7 * bw..1.3 * bw).contains(&pace), "pacing {pace}");
    }

    #[test]
    fn random_loss_does_not_shrink_the_model() {
        let mut p = Path::new(100e6, Duration::from_millis(10));
        for _ in 0..40 {
            p.round(0.0);
        }
        let (bw, cwnd) = (p.b.bw(), p.cwnd);
        // 5% of every round lost: what gets through is 95% of the rate.
        for _ in 0..100 {
            p.round(0.05);
        }
        assert!(p.b.bw() > 0.85 * bw, "bw {} from {bw}", p.b.bw());
        assert!(p.cwnd > cwnd * 8 / 10, "cwnd {} from {cwnd}", p.cwnd);
    }

    #[test]
    fn recovery_conserves_packets_then_restores_the_window() {
        let mut b = Bbr::new(1, 100 * MSS);
        let mut cwnd = 100 * MSS;
        let ack = |state, inflight, delivered| BbrAck {
            now: Instant::from_millis(5),
            rs: None,
            acked_sacked: 2 * MSS,
            losses: 0,
            prior_inflight: inflight + 2 * MSS,
            inflight,
            delivered,
            mss: MSS,
            state,
            srtt: None,
        };
        b.on_congestion(cwnd);
        b.on_ack(&ack(CaState::Recovery, 40 * MSS, 10_000), &mut cwnd);
        assert_eq!(cwnd, 42 * MSS, "what is in flight and what was delivered");
        b.on_ack(&ack(CaState::Recovery, 38 * MSS, 12_000), &mut cwnd);
        assert_eq!(cwnd, 42 * MSS, "never below conservation");
        b.on_ack(&ack(CaState::Open, 38 * MSS, 14_000), &mut cwnd);
        assert!(cwnd >= 100 * MSS, "restored: {cwnd}");
    }

    #[test]
    fn an_old_minimum_rtt_sends_it_to_probe_rtt_and_back() {
        let mut p = Path::new(100e6, Duration::from_millis(10));
        for _ in 0..40 {
            p.round(0.0);
        }
        let cwnd = p.cwnd;
        // The RTT rises (a queue elsewhere) for more than ten seconds.
        p.rtt = Duration::from_millis(12);
        let mut seen_probe = false;
        for _ in 0..1000 {
            p.round(0.0);
            if p.b.mode() == BbrMode::ProbeRtt {
                seen_probe = true;
                assert!(p.cwnd <= MIN_CWND_SEGS * MSS, "cwnd {}", p.cwnd);
            } else if seen_probe {
                break;
            }
        }
        assert!(seen_probe, "PROBE_RTT after ten seconds");
        assert_eq!(p.b.mode(), BbrMode::ProbeBw);
        assert_eq!(p.b.min_rtt(), Some(Duration::from_millis(12)));
        assert!(p.cwnd >= cwnd, "window restored: {} from {cwnd}", p.cwnd);
    }

    #[test]
    fn the_max_filter_forgets_after_its_window() {
        let mut f = MaxFilter::default();
        f.update(10, 1, 100.0);
        for t in 2..=11 {
            f.update(10, t, 50.0);
            assert_eq!(f.get(), 100.0, "round {t}");
        }
        f.update(10, 12, 50.0);
        assert_eq!(f.get(), 50.0);
        f.update(10, 13, 70.0);
        assert_eq!(f.get(), 70.0);
    }
}
