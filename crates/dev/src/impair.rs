//! Seeded link impairments: delay, jitter, loss, duplication, reordering, rate.
//!
//! The kernel on our test machines has no netem, so the memory wire and hub carry
//! their own. Every decision draws from a seeded [`Rng`], so the same seed and the
//! same frames give the same deliveries.

use crate::rng::Rng;
use crate::{Duration, Instant};

/// What a link does to the frames crossing it. The default is a perfect link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Impairments {
    /// Fixed one-way delay.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `[0, jitter]` per frame. Jitter larger than the
    /// gap between frames reorders them, as netem's does.
    pub jitter: Duration,
    /// Probability in `[0, 1]` that a frame is lost (per receiver on a hub).
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that a frame is reordered: it skips `delay` (netem's semantics), or,
    /// on a link without delay, is held back by [`REORDER_HOLD`] so its successors
    /// overtake it.
    pub reorder: f64,
    /// Serialisation rate in bits per second; 0 for unlimited. Frames queue behind
    /// each other at this rate (bounded by the link's queue limit).
    pub rate_bps: u64,
    /// Probability that an ECN-capable IP packet (ECT(0) or ECT(1) in its header)
    /// is marked Congestion Experienced on the way (RFC 3168 §5), as an active
    /// queue that marks rather than drops; others pass unmarked.
    pub ce: f64,
}

/// How long a reordered frame is held back on a link without delay.
pub const REORDER_HOLD: Duration = Duration::from_millis(1);

impl Default for Impairments {
    fn default() -> Self {
        Impairments {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            rate_bps: 0,
            ce: 0.0,
        }
    }
}

impl Impairments {
    /// True if this link delivers every frame at once, unchanged.
    pub fn is_perfect(&self) -> bool {
        *self == Impairments::default()
    }

    /// Checks the probabilities are in `[0, 1]`.
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
            ("ce", self.ce),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!(
                    "impairment {name}={p} is not a probability in [0, 1]"
                ));
            }
        }
        Ok(())
    }
}

/// Marks the Ethernet frame `f` Congestion Experienced when it carries an
/// ECN-capable IPv4 or IPv6 packet (ECT(0) or ECT(1)), the IPv4 header checksum
/// updated (RFC 1624); anything else is left as it is. Whether it marked.
pub fn mark_ce(f: &mut [u8]) -> bool {
    const ETH: usize = 14;
    match f.get(12..14) {
        Some([0x08, 0x00]) if f.len() >= ETH + 20 => {
            let tos = f[ETH + 1];
            if tos & 3 == 0 || tos & 3 == 3 {
                return false;
            }
            let new = tos | 3;
            f[ETH + 1] = new;
            // The checksum's word holding TOS: version and IHL in its high byte.
            let old_word = u16::from_be_bytes([f[ETH], tos]);
            let new_word = u16::from_be_bytes([f[ETH], new]);
            let sum = u16::from_be_bytes([f[ETH + 10], f[ETH + 11]]);
            // HC' = ~(~HC + ~m + m') (RFC 1624, equation 3).
            let mut acc = u32::from(!sum) + u32::from(!old_word) + u32::from(new_word);
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            f[ETH + 10..ETH + 12].copy_from_slice(&(!(acc as u16)).to_be_bytes());
            true
        }
        Some([0x86, 0xdd]) if f.len() >= ETH + 40 => {
            // The traffic class's ECN bits are bits 4 and 5 of the second byte.
            let ecn = (f[ETH + 1] >> 4) & 3;
            if ecn == 0 || ecn == 3 {
                return false;
            }
            f[ETH + 1] |= 0x30;
            true
        }
        _ => false,
    }
}

/// The sending side's impairment state: its random stream and when its line is free.
#[derive(Debug, Clone)]
pub struct Impairer {
    pub cfg: Impairments,
    rng: Rng,
    busy_until: Instant,
}

impl Impairer {
    pub fn new(cfg: Impairments, seed: u64) -> Self {
        Impairer {
            cfg,
            rng: Rng::new(seed),
            busy_until: Instant::ZERO,
        }
    }

    /// When a frame of `len` bytes sent at `now` has left the sender (rate limit).
    pub fn serialise(&mut self, now: Instant, len: usize) -> Instant {
        if self.cfg.rate_bps == 0 {
            return now;
        }
        let start = self.busy_until.max(now);
        let bits = (len as u128 + 24) * 8; // preamble, SFD, FCS and gap: 24 bytes
        let ns = bits * 1_000_000_000 / u128::from(self.cfg.rate_bps);
        let done = start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
        self.busy_until = done;
        done
    }

    /// Whether the next frame is to be marked Congestion Experienced (if it is
    /// ECN-capable; see [`mark_ce`]).
    pub fn marks_ce(&mut self) -> bool {
        self.cfg.ce > 0.0 && self.rng.chance(self.cfg.ce)
    }

    /// Deliveries for one receiver of a frame that left the sender at `sent`:
    /// zero (lost), one or two (duplicated) arrival times, written into `out`.
    pub fn deliveries(&mut self, sent: Instant, out: &mut [Instant; 2]) -> usize {
        let c = self.cfg;
        if c.is_perfect() {
            out[0] = sent;
            return 1;
        }
        if c.loss > 0.0 && self.rng.chance(c.loss) {
            return 0;
        }
        let n = if c.duplicate > 0.0 && self.rng.chance(c.duplicate) {
            2
        } else {
            1
        };
        for slot in out.iter_mut().take(n) {
            let mut d = c.delay;
            if !c.jitter.is_zero() {
                let j = u64::try_from(c.jitter.as_nanos()).unwrap_or(u64::MAX);
                d += Duration::from_nanos(self.rng.below(j.saturating_add(1)));
            }
            if c.reorder > 0.0 && self.rng.chance(c.reorder) {
                d = if c.delay.is_zero() {
                    d + REORDER_HOLD
                } else {
                    d - c.delay
                };
            }
            *slot = sent + d;
        }
        n
    }

    /// The time the line becomes free (for a rate-limited link's backlog bound).
    pub fn busy_until(&self) -> Instant {
        self.busy_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_link_delivers_now() {
        let mut i = Impairer::new(Impairments::default(), 1);
        let mut out = [Instant::ZERO; 2];
        let t = Instant::from_millis(3);
        assert_eq!(i.deliveries(t, &mut out), 1);
        assert_eq!(out[0], t);
    }

    #[test]
    fn loss_rate_is_close_to_configured_and_seeded() {
        let cfg = Impairments {
            loss: 0.25,
            ..Default::default()
        };
        let run = |seed| {
            let mut i = Impairer::new(cfg, seed);
            let mut out = [Instant::ZERO; 2];
            (0..10_000)
                .filter(|_| i.deliveries(Instant::ZERO, &mut out) == 0)
                .count()
        };
        let lost = run(7);
        assert!((2_200..2_800).contains(&lost), "lost {lost} of 10000");
        assert_eq!(lost, run(7), "same seed, same losses");
        assert_ne!(lost, run(8));
    }

    #[test]
    fn duplicate_delay_jitter_reorder() {
        let cfg = Impairments {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(2),
            duplicate: 1.0,
            ..Default::default()
        };
        let mut i = Impairer::new(cfg, 3);
        let mut out = [Instant::ZERO; 2];
        assert_eq!(i.deliveries(Instant::ZERO, &mut out), 2);
        for t in out {
            assert!(
                t >= Instant::from_millis(10) && t <= Instant::from_millis(12),
                "{t}"
            );
        }
        let mut r = Impairer::new(
            Impairments {
                delay: Duration::from_millis(10),
                reorder: 1.0,
                ..Default::default()
            },
            3,
        );
        assert_eq!(r.deliveries(Instant::from_millis(1), &mut out), 1);
        assert_eq!(
            out[0],
            Instant::from_millis(1),
            "a reordered frame skips the delay"
        );
    }

    #[test]
    fn rate_limit_serialises_frames() {
        // 1 Mbit/s: a 101-byte frame plus 24 bytes of overhead takes 1 ms.
        let mut i = Impairer::new(
            Impairments {
                rate_bps: 1_000_000,
                ..Default::default()
            },
            1,
        );
        assert_eq!(i.serialise(Instant::ZERO, 101), Instant::from_millis(1));
        assert_eq!(i.serialise(Instant::ZERO, 101), Instant::from_millis(2));
        assert_eq!(
            i.serialise(Instant::from_millis(10), 101),
            Instant::from_millis(11)
        );
    }

    #[test]
    fn validate_rejects_bad_probabilities() {
        assert!(Impairments {
            loss: 1.5,
            ..Default::default()
        }
        .validate()
        .is_err());
        assert!(Impairments {
            reorder: -0.1,
            ..Default::default()
        }
        .validate()
        .is_err());
        assert!(Impairments {
            loss: 0.5,
            ..Default::default()
        }
        .validate()
        .is_ok());
    }

    /// The ones' complement sum of an IPv4 header: 0xffff when its checksum holds.
    fn header_sum(h: &[u8]) -> u16 {
        let mut acc: u32 = h
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn ce_marks_only_ecn_capable_packets_and_keeps_the_checksum() {
        let frame = |tos: u8| {
            let mut f = vec![0u8; 14 + 20];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let ip = &mut f[14..];
            ip.copy_from_slice(&[
                0x45, tos, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
            ]);
            let sum = !header_sum(ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            f
        };
        for (tos, marked) in [
            (0x02, true),
            (0x01, true),
            (0xb8 | 0x02, true),
            (0x00, false),
        ] {
            let mut f = frame(tos);
            assert_eq!(mark_ce(&mut f), marked, "tos {tos:#x}");
            let want = if marked { tos | 3 } else { tos };
            assert_eq!(f[15], want);
            assert_eq!(header_sum(&f[14..]), 0xffff, "tos {tos:#x}: checksum");
        }
        // Already CE: left as it is.
        assert!(!mark_ce(&mut frame(0x03)));
        // IPv6: the ECN bits of the traffic class, ECT(0) to CE.
        let mut f = vec![0u8; 14 + 40];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[15] = 0x20;
        assert!(mark_ce(&mut f));
        assert_eq!(f[15], 0x30);
        f[15] = 0;
        assert!(!mark_ce(&mut f));
    }
}
