//! The worker's rate limits on what hostile segments draw from it (RFC 5961 §7's
//! challenge ACKs, FreeBSD's `badport_bandlim` for resets): a per-second
//! allowance, asked only where such an answer is about to be sent.

use super::TcpCx;
use crate::tcp::tcb::Tcb;
use dev::{Duration, Instant};

/// At most about `limit` answers a second. Each second's allowance is drawn
/// between half of `limit` and all of it (Linux randomizes its challenge ACK
/// limit so, after CVE-2016-5696; FreeBSD jitters `icmplim`): a peer counting the
/// answers it provokes learns nothing about the answers others provoked.
#[derive(Debug, Default)]
pub(super) struct RateLimit {
    /// When the current second ends, and what is left of its allowance.
    end: Instant,
    left: u32,
    /// The draw's state (splitmix64), from the stack's secret: reproducible in a
    /// simulation, unknown to a peer.
    rng: u64,
}

impl RateLimit {
    /// Whether one more answer may go at `now`, under a `limit` a second (0: no
    /// limit); `seed` is the stack's secret.
    pub(super) fn take(&mut self, now: Instant, limit: u32, seed: u64) -> bool {
        if limit == 0 {
            return true;
        }
        if now >= self.end {
            self.end = now + Duration::from_secs(1);
            self.rng = splitmix64(self.rng ^ seed);
            let half = limit / 2;
            self.left = limit - (self.rng % (u64::from(limit - half) + 1)) as u32;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
}

/// A node-wide rate `limit` (0: none), this worker's share of it.
pub(super) fn per_worker(limit: u32, cx: &TcpCx<'_, '_>) -> u32 {
    share(limit, cx.tcp.nworkers)
}

fn share(limit: u32, workers: usize) -> u32 {
    limit.div_ceil(workers.max(1) as u32)
}

/// A challenge ACK that `tcb`'s input just decided goes only within the node's
/// limit (RFC 5961 §7), this worker's share of it in `bucket`: asked only when
/// the input decided one, nothing for the other segments.
pub(super) fn limit_challenge(cx: &mut TcpCx<'_, '_>, tcb: &mut Tcb, bucket: &mut RateLimit) {
    let (now, seed) = (cx.link.now, cx.ip.isn_secret);
    let (limit, workers) = (cx.tcp.cfg.challenge_ack_limit, cx.tcp.nworkers);
    tcb.take_challenge(&mut cx.link.stats.tcp, || {
        bucket.take(now, share(limit, workers), seed)
    });
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::RateLimit;
    use dev::{Duration, Instant};

    /// Each second allows between half the limit and all of it, not always the
    /// same; no limit allows everything.
    #[test]
    fn allowance_per_second_is_drawn_within_the_limit() {
        let mut r = RateLimit::default();
        let mut seen = Vec::new();
        for sec in 0..20u64 {
            let now = Instant::ZERO + Duration::from_secs(sec);
            let n = (0..5000).filter(|_| r.take(now, 1000, 7)).count();
            assert!((500..=1000).contains(&n), "{n}");
            seen.push(n);
        }
        seen.dedup();
        assert!(seen.len() > 10, "{seen:?}");
        assert!((0..100_000).all(|_| r.take(Instant::ZERO, 0, 7)));
    }
}
