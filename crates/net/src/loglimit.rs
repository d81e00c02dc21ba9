//! A rate limit for log lines that someone outside can cause at will (neighbour
//! churn on a link, routing misses, refused control clients): at most so many
//! lines per window, the rest held back and counted, and the count said once the
//! window they were held in has passed ("suppressed 285 neighbour messages"), so
//! a flood costs a log a handful of lines, never one per packet. FreeBSD's
//! ppsratecheck(9) and the kernel's "N messages suppressed" do the same.
//!
//! Sans-IO: the caller passes the time in.

use dev::{Duration, Instant};

/// One kind of line's limit.
#[derive(Clone, Debug)]
pub struct LogLimit {
    lines: u32,
    per: Duration,
    /// When the current window began; `None` before the first line.
    start: Option<Instant>,
    used: u32,
    held: u64,
}

/// What [`LogLimit::check`] allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogCheck {
    /// Log this line; `held` lines were held back before it (say so first, if
    /// not zero).
    Log { held: u64 },
    /// Hold this line back (it is counted).
    Hold,
}

impl LogLimit {
    /// At most `lines` lines every `per`.
    pub const fn new(lines: u32, per: Duration) -> Self {
        LogLimit {
            lines,
            per,
            start: None,
            used: 0,
            held: 0,
        }
    }

    /// Lines allowed per window.
    pub fn lines(&self) -> u32 {
        self.lines
    }

    fn window_over(&self, now: Instant) -> bool {
        self.start
            .is_none_or(|s| now.saturating_duration_since(s) >= self.per)
    }

    /// Whether a line may go out at `now`.
    pub fn check(&mut self, now: Instant) -> LogCheck {
        let mut held = 0;
        if self.window_over(now) {
            held = std::mem::take(&mut self.held);
            self.start = Some(now);
            self.used = 0;
        }
        if self.used < self.lines {
            self.used += 1;
            LogCheck::Log { held }
        } else {
            self.held += 1;
            LogCheck::Hold
        }
    }

    /// When the lines held back may be said ([`LogLimit::lifted`]): the end of
    /// their window; `None` when none are held.
    pub fn lifts_at(&self) -> Option<Instant> {
        match (self.held, self.start) {
            (0, _) | (_, None) => None,
            (_, Some(s)) => Some(s + self.per),
        }
    }

    /// The lines held back, once the window they were held in is over (to be
    /// logged then); `None` while it lasts or when none were.
    pub fn lifted(&mut self, now: Instant) -> Option<u64> {
        if self.held == 0 || !self.window_over(now) {
            return None;
        }
        self.start = None;
        self.used = 0;
        Some(std::mem::take(&mut self.held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_logs_the_limit_then_one_count_when_the_window_ends() {
        let mut l = LogLimit::new(20, Duration::from_secs(5));
        let t0 = Instant::from_secs(100);
        let mut logged = 0;
        for i in 0..300u64 {
            match l.check(Instant::from_nanos(t0.as_nanos() + i * 1_000_000)) {
                LogCheck::Log { held } => {
                    assert_eq!(held, 0);
                    logged += 1;
                }
                LogCheck::Hold => {}
            }
        }
        assert_eq!(logged, 20);
        assert_eq!(l.lifts_at(), Some(Instant::from_secs(105)));
        assert_eq!(l.lifted(Instant::from_secs(104)), None, "the window lasts");
        assert_eq!(l.lifted(Instant::from_secs(105)), Some(280));
        assert_eq!(l.lifted(Instant::from_secs(106)), None, "said once");
        assert_eq!(l.lifts_at(), None);
        // A quiet link logs every line again.
        assert_eq!(l.check(Instant::from_secs(107)), LogCheck::Log { held: 0 });
    }

    #[test]
    fn a_line_after_the_window_carries_the_count_held_before_it() {
        let mut l = LogLimit::new(1, Duration::from_secs(1));
        assert_eq!(l.check(Instant::from_secs(1)), LogCheck::Log { held: 0 });
        assert_eq!(l.check(Instant::from_secs(1)), LogCheck::Hold);
        assert_eq!(l.check(Instant::from_secs(1)), LogCheck::Hold);
        assert_eq!(l.check(Instant::from_secs(2)), LogCheck::Log { held: 2 });
        assert_eq!(l.lifted(Instant::from_secs(9)), None);
    }
}
