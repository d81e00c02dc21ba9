//! Time as protocol code sees it: a monotonic instant in nanoseconds, passed in.
//!
//! `Instant` has no `now()`: only a [`Clock`] makes one, and protocol code never holds a
//! clock. Workers read their clock once per batch; `sim` drives a virtual one.

pub use std::time::Duration;

/// A point in monotonic time, in nanoseconds since an arbitrary origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_nanos(n: u64) -> Self {
        Instant(n)
    }
    pub const fn from_micros(us: u64) -> Self {
        Instant(us.saturating_mul(1_000))
    }
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(1_000_000))
    }
    pub const fn from_secs(s: u64) -> Self {
        Instant(s.saturating_mul(1_000_000_000))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl std::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl std::ops::Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_sub(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl std::ops::Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, o: Instant) -> Duration {
        self.saturating_duration_since(o)
    }
}

impl std::fmt::Display for Instant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.0 / 1_000_000_000,
            (self.0 / 1_000) % 1_000_000
        )
    }
}

/// Something that tells the time. Only workers and drivers hold one.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

/// The real monotonic clock, with its origin at creation.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: std::time::Instant,
}

impl MonotonicClock {
    pub fn new() -> Self {
        MonotonicClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Instant {
        Instant(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t + Duration::from_millis(1), Instant::from_millis(6));
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(
            Instant::from_secs(1) - Instant::from_secs(2),
            Duration::ZERO
        );
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(format!("{}", Instant::from_micros(1_500_000)), "1.500000s");
    }
}
