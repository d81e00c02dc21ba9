//! RFC 2889's tests of a learning bridge, on the three ports of `bench rfc2544`'s
//! bridge topology: `ta` sends, `tb` receives what the bridge forwards, `tc` (the
//! monitor) sees what it floods.
//!
//! - Forwarding rate at the maximum offered load (§5.1's measurement, one port
//!   pair): what arrived a second in the RFC 2544 unpaced trial at 64 bytes.
//! - Address caching capacity (§5.7): learning frames from N addresses on `tb`,
//!   then a test frame from `ta` to each; the bridge holds N addresses when every
//!   test frame reaches `tb` and none floods to `tc`. N doubles from 512 until it
//!   fails, then a binary search between the last pass and the first failure. The
//!   table is flushed before each trial (§5.7): the kernel bridge's with
//!   `fdb_flush`, mpstack's by restarting the node, which has no run-time control
//!   yet.
//! - Address learning rate (§5.8): the highest rate of learning frames (1,024
//!   addresses, or the capacity if smaller) at which every address is learned,
//!   checked as above; unpaced first, then a binary search.
//! - Broadcast frame forwarding (§5.9): the highest rate of 64-byte broadcast
//!   frames from `ta` that reaches both `tb` and `tc` with no loss.
//!
//! Frames are 64 bytes (60 here, the FCS being the device's) of a local
//! experimental EtherType, marked with the trial and whether they are test frames.

use super::{ahead, bisect, open_queues, progress, BURST, MAGIC, STEPS};
use crate::BenchArgs;
use dev::{Mbuf, Queue};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The EtherType of RFC 2889's frames here (IEEE 802's local experimental one).
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
/// Learning frames a second in the capacity test, and test frames a second.
const LEARN_RATE: f64 = 200_000.0;
/// The largest table tried in the capacity test.
const MAX_ADDRS: u64 = 1 << 15;
/// Steps of the capacity and learning rate searches.
const SEARCH_STEPS: u32 = 5;
/// Addresses in the learning rate test, at most.
const LEARN_ADDRS: u64 = 1024;
/// Frames a broadcast trial sends, at most a second's worth.
const BCAST_SECS: f64 = 0.25;

/// A frame's kind: learning frames are not counted, test frames are.
const LEARNING: u8 = 1;
const TEST: u8 = 2;

/// RFC 2889's results for one bridge.
#[derive(Debug, Clone)]
pub struct Rfc2889 {
    pub case: &'static str,
    /// Forwarding rate at the maximum offered load, 64 bytes, frames a second.
    pub forwarding: f64,
    /// Addresses the bridge held in the largest trial that passed, and the
    /// smallest that failed (`None`: none failed up to [`MAX_ADDRS`]).
    pub capacity: u64,
    pub capacity_failed: Option<u64>,
    /// Learning frames a second at which every address was learned; `true` if that
    /// was the tester's unpaced rate (the bridge may learn faster).
    pub learning: f64,
    pub learning_capped: bool,
    /// Broadcast frames a second forwarded to both other ports with no loss.
    pub broadcast: f64,
    pub broadcast_capped: bool,
}

/// A 60-byte frame from `src` to `dst`, marked with `trial` and `kind`.
fn frame(dst: [u8; 6], src: [u8; 6], trial: u32, kind: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ETHERTYPE);
    f[14..18].copy_from_slice(&MAGIC.to_be_bytes());
    f[18..22].copy_from_slice(&trial.to_be_bytes());
    f[22] = kind;
    f
}

/// Whether `f` is a test frame of `trial`.
fn is_test(f: &[u8], trial: u32) -> bool {
    f.len() >= 23
        && f[12..14] == ETHERTYPE
        && f[14..18] == MAGIC.to_be_bytes()
        && f[18..22] == trial.to_be_bytes()
        && f[22] == TEST
}

/// Address `i` of trial `trial`: locally administered, unicast, distinct per trial.
fn addr(trial: u32, i: u64) -> [u8; 6] {
    let t = trial.to_be_bytes();
    let i = (i as u32).to_be_bytes();
    [0x02, t[2], t[3], i[1], i[2], i[3]]
}

/// Sends `frames` (cycled until `count` are out) on `q` at `rate` frames a second
/// (0: as fast as it goes). Returns the frames sent.
fn blast(q: &mut Box<dyn Queue>, frames: &[Mbuf], count: u64, rate: f64) -> u64 {
    let start = Instant::now();
    let mut sent = 0u64;
    let mut k = 0usize;
    let mut batch = Vec::with_capacity(BURST);
    while sent < count {
        if ahead(start, sent, rate) {
            continue;
        }
        let n = ((count - sent) as usize).min(BURST);
        for _ in 0..n {
            if let Ok(c) = frames[k % frames.len()].try_clone() {
                batch.push(c);
            }
            k += 1;
        }
        let took = q.tx_burst(dev::Instant::ZERO, &mut batch) as u64;
        batch.clear();
        if took == 0 {
            // The socket's buffer is full: let the kernel drain it.
            std::thread::yield_now();
        }
        sent += took;
    }
    sent
}

/// The three ports: a socket to send on `ta` and on `tb` (learning frames), one to
/// receive on `tb` and on `tc`.
struct Ports {
    ta: Box<dyn Queue>,
    tb_tx: Box<dyn Queue>,
    /// The receivers run in threads of their own during a trial, from before the
    /// first frame is sent: a ring whose blocks the kernel hands over every
    /// millisecond holds only as many frames as its blocks times a millisecond's.
    tb: Box<dyn Queue>,
    tc: Box<dyn Queue>,
    ta_mac: [u8; 6],
}

impl Ports {
    /// Runs `send` on `ta` (and `tb`, for learning frames) while `tb` and `tc` count
    /// the test frames of `trial`; (test frames at `tb`, at `tc`).
    fn trial(
        &mut self,
        trial: u32,
        send: impl FnOnce(&mut Box<dyn Queue>, &mut Box<dyn Queue>),
    ) -> (u64, u64) {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
        let Ports {
            ta, tb_tx, tb, tc, ..
        } = self;
        std::thread::scope(|s| {
            let rx_c = {
                let (stop, c) = (stop.clone(), counts[1].clone());
                s.spawn(move || count(tc, trial, &stop, &c))
            };
            let rx_b = {
                let (stop, c) = (stop.clone(), counts[0].clone());
                s.spawn(move || count(tb, trial, &stop, &c))
            };
            send(ta, tb_tx);
            // Stragglers in the bridge's and the rings' queues.
            std::thread::sleep(Duration::from_millis(150));
            stop.store(true, Ordering::Relaxed);
            let _ = rx_b.join();
            let _ = rx_c.join();
        });
        (
            counts[0].load(Ordering::Relaxed),
            counts[1].load(Ordering::Relaxed),
        )
    }
}

/// Counts the test frames of `trial` arriving on `q` until `stop`.
fn count(q: &mut Box<dyn Queue>, trial: u32, stop: &AtomicBool, c: &AtomicU64) {
    let mut v = Vec::with_capacity(256);
    let mut poller = dev::poll::Poller::new();
    let fds: Vec<_> = q.fd().into_iter().collect();
    loop {
        let n = q.rx_burst(dev::Instant::ZERO, &mut v, 256);
        if n == 0 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let _ = poller.wait(&fds, Some(Duration::from_millis(2)));
            continue;
        }
        let got = v.drain(..).filter(|m| is_test(m.first(), trial)).count();
        c.fetch_add(got as u64, Ordering::Relaxed);
    }
}

/// The three ports' queues, opened in the tester's namespace `ns`.
fn open(ns: &str) -> Result<Ports, String> {
    let ta_mac = super::mac_of(ns, "ta")?;
    let mut qs = open_queues(ns, &["ta", "tb", "tb", "tc"])?;
    let tc = qs.pop().ok_or("no tc")?;
    let tb = qs.pop().ok_or("no tb")?;
    let tb_tx = qs.pop().ok_or("no tb")?;
    let ta = qs.pop().ok_or("no ta")?;
    Ok(Ports {
        ta,
        tb_tx,
        tb,
        tc,
        ta_mac,
    })
}

/// Whether the bridge learned `n` addresses sent at `rate` learning frames a second
/// (0: unpaced): every test frame to them reached `tb`, none flooded to `tc`; and
/// the rate the learning frames went out at.
fn learned(
    p: &mut Ports,
    flush: &mut dyn FnMut() -> Result<(), String>,
    trial: u32,
    n: u64,
    rate: f64,
) -> (bool, f64) {
    if let Err(e) = flush() {
        eprintln!("rfc2889: flushing the bridge's table: {e}");
        return (false, 0.0);
    }
    let ta_mac = p.ta_mac;
    let learning: Vec<Mbuf> = (0..n)
        .filter_map(|i| Mbuf::from_slice(&frame(ta_mac, addr(trial, i), trial, LEARNING)).ok())
        .collect();
    let tests: Vec<Mbuf> = (0..n)
        .filter_map(|i| Mbuf::from_slice(&frame(addr(trial, i), ta_mac, trial, TEST)).ok())
        .collect();
    let mut learn_rate = 0.0;
    let (at_b, at_c) = p.trial(trial, |ta, tb| {
        let t0 = Instant::now();
        let sent = blast(tb, &learning, n, rate);
        learn_rate = sent as f64 / t0.elapsed().as_secs_f64().max(1e-6);
        // The bridge's learning settles (a kernel bridge learns in its receive
        // path; mpstack's worker drains its ring).
        std::thread::sleep(Duration::from_millis(50));
        blast(ta, &tests, n, LEARN_RATE);
    });
    (at_b >= n && at_c == 0, learn_rate)
}

/// RFC 2889's tests of bridge `case`, whose tester namespace is `ns`;
/// `forwarding` is the RFC 2544 unpaced trial's arrival rate at 64 bytes.
/// `flush` empties the bridge's address table.
pub fn run(
    a: &BenchArgs,
    case: &'static str,
    ns: &str,
    forwarding: f64,
    flush: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Rfc2889, String> {
    let mut p = open(ns)?;
    // Trials number from a base of their own (the RFC 2544 ones are done).
    let mut trial: u32 = 0x2889_0000;
    let mut next = || {
        trial += 1;
        trial
    };
    // The bridge learns where `ta` is.
    let hello: Vec<Mbuf> = Mbuf::from_slice(&frame([0xff; 6], p.ta_mac, 0, LEARNING))
        .into_iter()
        .collect();
    blast(&mut p.ta, &hello, 3, 0.0);
    std::thread::sleep(Duration::from_millis(50));

    // Address caching capacity: double until a failure, then search between.
    let (mut good, mut bad) = (0u64, None);
    let mut n = 512u64;
    while n <= MAX_ADDRS {
        if learned(&mut p, flush, next(), n, LEARN_RATE).0 {
            good = n;
            n *= 2;
        } else {
            bad = Some(n);
            break;
        }
    }
    if let Some(mut hi) = bad {
        for _ in 0..SEARCH_STEPS {
            let mid = (good + hi) / 2;
            if hi - good <= 16 {
                break;
            }
            if learned(&mut p, flush, next(), mid, LEARN_RATE).0 {
                good = mid;
            } else {
                hi = mid;
            }
        }
        bad = Some(hi);
    }
    progress(
        a,
        &format!(
            "rfc2889: {case}: address caching capacity {good}{}",
            bad.map_or(format!(" (none failed up to {MAX_ADDRS})"), |b| format!(
                " (failed at {b})"
            ))
        ),
    );

    // Address learning rate: unpaced first, then a binary search.
    let n = LEARN_ADDRS.min(good.max(1));
    let (capped, top) = learned(&mut p, flush, next(), n, 0.0);
    let lo = if capped {
        top
    } else {
        bisect(0.0, top.max(LEARN_RATE), SEARCH_STEPS, |mid| {
            learned(&mut p, flush, next(), n, mid).0
        })
    };
    progress(
        a,
        &format!(
            "rfc2889: {case}: address learning rate {}{:.0} frames/s ({n} addresses)",
            if capped { ">= " } else { "" },
            lo
        ),
    );

    // Broadcast forwarding: the highest rate both other ports get in full.
    let bcast = |p: &mut Ports, trial: u32, rate: f64| -> (bool, f64) {
        let f: Vec<Mbuf> = Mbuf::from_slice(&frame([0xff; 6], p.ta_mac, trial, TEST))
            .into_iter()
            .collect();
        let want = if rate > 0.0 {
            (rate * BCAST_SECS) as u64
        } else {
            // Unpaced: as many as a quarter second takes at the tester's 64-byte
            // rate, measured by this very trial.
            (forwarding.max(LEARN_RATE) * BCAST_SECS) as u64
        };
        let mut sent = 0;
        let t0 = Instant::now();
        let (b, c) = p.trial(trial, |ta, _| sent = blast(ta, &f, want, rate));
        let secs = t0.elapsed().as_secs_f64().max(1e-6);
        (sent > 0 && b >= sent && c >= sent, sent as f64 / secs)
    };
    let (all, top) = bcast(&mut p, next(), 0.0);
    let blo = if all {
        top
    } else {
        bisect(0.0, top, STEPS, |mid| bcast(&mut p, next(), mid).0)
    };
    progress(
        a,
        &format!(
            "rfc2889: {case}: broadcast forwarding {}{:.0} frames/s to both other ports",
            if all { ">= " } else { "" },
            blo
        ),
    );
    Ok(Rfc2889 {
        case,
        forwarding,
        capacity: good,
        capacity_failed: bad,
        learning: lo,
        learning_capped: capped,
        broadcast: blo,
        broadcast_capped: all,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_trial_and_kind() {
        let f = frame([2; 6], [4; 6], 77, TEST);
        assert_eq!(f.len(), 60);
        assert!(is_test(&f, 77));
        assert!(!is_test(&f, 78));
        assert!(!is_test(&frame([2; 6], [4; 6], 77, LEARNING), 77));
        // Addresses: unicast, locally administered, distinct within and across trials.
        let a = addr(5, 0x1_0203);
        assert_eq!(a[0] & 3, 2);
        assert_ne!(addr(5, 1), addr(6, 1));
        assert_ne!(addr(5, 1), addr(5, 2));
    }
}
