//! Congestion control: how the window grows in congestion avoidance and how far it
//! falls on a loss. NewReno (RFC 5681) and CUBIC (RFC 9438, the default). Slow start,
//! fast recovery and the timeout response are the control block's, shared by both.

use dev::{Duration, Instant};

/// The algorithm a connection uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CongestionControl {
    NewReno,
    #[default]
    Cubic,
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

    /// A timeout: the epoch restarts from the collapsed window.
    pub fn on_timeout(&mut self) {
        self.epoch = None;
    }

    /// Window growth in congestion avoidance for `acked` new bytes, in bytes.
    pub fn avoid(&mut self, now: Instant, cwnd: u32, acked: u32, mss: u32, srtt: Duration) -> u32 {
        let mss = mss.max(1);
        match self.algo {
            CongestionControl::NewReno => (mss * mss / cwnd.max(1)).max(1),
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
