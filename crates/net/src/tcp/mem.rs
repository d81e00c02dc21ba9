//! The bound on all TCP buffer memory of a stack (Linux's `net.ipv4.tcp_mem`, the
//! socket side of FreeBSD's `kern.ipc.maxmbufmem`): `net.inet.tcp.mem`, three
//! thresholds in bytes ([`TcpMemLimits`]) over what every connection's buffers
//! hold (its send buffer and receive buffer in the control block, reassembly
//! queue included, and its two byte channels to the application).
//!
//! Without it, the only bounds are per connection (its buffers) and on the number
//! of connections, and a single peer that opens connections, asks each for a large
//! file and never reads holds ~600 KB a connection: 65,536 of them, 40 GB.
//!
//! Three states, with Linux's hysteresis ([`MemState::next`]):
//! - [`MemState::Normal`] below `pressure` (and, once left, until the total is
//!   below `low` again): buffers as configured.
//! - [`MemState::Pressure`]: every buffer of every connection is clamped to
//!   [`PRESSURE_BUF`]: the application's writes wait (EAGAIN, or a blocking write
//!   blocks) while its connection holds that much, and received data beyond it is
//!   dropped unacknowledged, as a shut window would drop it (the window offered
//!   shrinks with the room left; an offered window is never taken back, data in
//!   it is dropped as Linux's `tcp_prune_queue` drops). What a connection already
//!   holds stays (it is the application's data); it drains to the clamp.
//! - [`MemState::High`] above `high` (below it, back to Pressure): new
//!   memory refused beyond [`HIGH_BUF`] a buffer, the minimum every connection
//!   keeps so that it still makes progress (Linux's `tcp_wmem[0]`/`tcp_rmem[0]`,
//!   4 KiB, "guaranteed to each TCP socket"), and orphans — connections closed
//!   by their application whose data still waits (FIN_WAIT_1 behind a shut
//!   window, persist) — are reset and freed first (`tcp.memorphandrop`, Linux's
//!   `tcp_out_of_memory` in `tcp_out_of_resources`).
//!
//! Accounting is cheap on the hot path: a connection's bytes are measured when
//! the worker services it (a few loads, no atomics written) and the difference
//! added to the worker's own sum, a plain integer; the worker publishes its sum
//! to its own cache line ([`TcpMem::publish`]) when it has moved by [`QUANTUM`]
//! or at the next check ([`CHECK_EVERY`]), and sums the workers' lines then. So
//! no byte written or received touches a shared counter, and the total is exact
//! to within a quantum per worker and a check interval.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// `net.inet.tcp.mem`: the thresholds, in bytes of buffered data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpMemLimits {
    /// Pressure ends below this.
    pub low: usize,
    /// Pressure begins above this.
    pub pressure: usize,
    /// New memory is refused above this.
    pub high: usize,
}

/// The default bound, before [`TcpMemLimits::for_memory`] scales it to the
/// machine: half the mbuf pool's clusters (2^17 of 2 KiB, 256 MiB), the half
/// `mbuf::pool::plenty_for` lets sockets take from it, so that sockets alone cannot
/// leave the receive path without buffers.
pub const DEFAULT_HIGH: usize = mbuf::pool::DEFAULT_CLUSTER_LIMIT * mbuf::MCLBYTES / 2;

impl TcpMemLimits {
    /// Linux's proportions (`tcp_init_mem`: low ¾ of pressure, high twice low):
    /// low half of high, pressure two thirds of it.
    pub const fn from_high(high: usize) -> TcpMemLimits {
        TcpMemLimits {
            low: high / 2,
            pressure: high / 3 * 2,
            high,
        }
    }

    /// The default for a machine of `total` bytes of memory: [`DEFAULT_HIGH`], or
    /// a tenth of the memory if that is less (Linux's `tcp_mem[2]` is 3/32 of it),
    /// at least 8 MiB.
    pub fn for_memory(total: usize) -> TcpMemLimits {
        TcpMemLimits::from_high(DEFAULT_HIGH.min(total / 10).max(8 << 20))
    }

    /// Whether the thresholds are in order (`low <= pressure <= high`, high not 0).
    pub fn is_valid(&self) -> bool {
        self.low <= self.pressure && self.pressure <= self.high && self.high > 0
    }
}

impl Default for TcpMemLimits {
    fn default() -> Self {
        TcpMemLimits::from_high(DEFAULT_HIGH)
    }
}

/// Each buffer of a connection under pressure holds at most this.
pub const PRESSURE_BUF: usize = 16 * 1024;
/// Each buffer of a connection above the high threshold holds at most this.
pub const HIGH_BUF: usize = 4096;
/// A worker publishes its sum when it has moved by this much.
pub const QUANTUM: usize = 256 * 1024;
/// A worker looks at the total at least this often while it runs.
pub const CHECK_EVERY: dev::Duration = dev::Duration::from_millis(10);

/// Where the total stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum MemState {
    #[default]
    Normal = 0,
    Pressure = 1,
    High = 2,
}

impl MemState {
    /// The state after `self` with `total` bytes held.
    pub fn next(self, total: usize, lim: &TcpMemLimits) -> MemState {
        if total > lim.high {
            MemState::High
        } else if total > lim.pressure {
            // Down from High once below high only as far as Pressure.
            MemState::Pressure
        } else if total >= lim.low && self != MemState::Normal {
            MemState::Pressure
        } else {
            MemState::Normal
        }
    }

    /// The most each buffer of a connection may hold in this state.
    pub fn clamp(self) -> usize {
        match self {
            MemState::Normal => usize::MAX,
            MemState::Pressure => PRESSURE_BUF,
            MemState::High => HIGH_BUF,
        }
    }

    fn from_u8(v: u8) -> MemState {
        match v {
            0 => MemState::Normal,
            1 => MemState::Pressure,
            _ => MemState::High,
        }
    }
}

/// One worker's published sum, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot(AtomicUsize);

/// The stack's TCP memory: the workers' sums and the state.
#[derive(Debug)]
pub struct TcpMem {
    slots: Box<[Slot]>,
    state: AtomicU8,
}

impl TcpMem {
    pub fn new(workers: usize) -> TcpMem {
        TcpMem {
            slots: (0..workers.max(1)).map(|_| Slot::default()).collect(),
            state: AtomicU8::new(0),
        }
    }

    /// Bytes held by every connection, as last published.
    pub fn total(&self) -> usize {
        self.slots.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }

    pub fn state(&self) -> MemState {
        MemState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Worker `w` holds `bytes`.
    pub(crate) fn publish(&self, w: usize, bytes: usize) {
        if let Some(s) = self.slots.get(w) {
            s.0.store(bytes, Ordering::Relaxed);
        }
    }

    /// Moves the state on from the total under `lim`; returns the state and, if
    /// this call made the change, the states it left and entered (one worker
    /// counts each change, from what the stack's state was, not the worker's
    /// last view of it).
    pub(crate) fn update(&self, lim: &TcpMemLimits) -> (MemState, Option<(MemState, MemState)>) {
        let total = self.total();
        let cur = self.state.load(Ordering::Relaxed);
        let next = MemState::from_u8(cur).next(total, lim);
        if next as u8 == cur {
            return (next, None);
        }
        match self
            .state
            .compare_exchange(cur, next as u8, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => (next, Some((MemState::from_u8(cur), next))),
            Err(now) => (MemState::from_u8(now), None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_the_total_with_linux_hysteresis() {
        let lim = TcpMemLimits {
            low: 100,
            pressure: 200,
            high: 300,
        };
        use MemState::*;
        let mut s = Normal;
        let mut seen = Vec::new();
        for total in [
            0, 150, 199, 201, 250, 150, 100, 99, 250, 301, 400, 250, 201, 150, 50,
        ] {
            s = s.next(total, &lim);
            seen.push(s);
        }
        assert_eq!(
            seen,
            [
                Normal, Normal, Normal, Pressure, Pressure, Pressure, Pressure, Normal, Pressure,
                High, High, Pressure, Pressure, Pressure, Normal
            ]
        );
        assert_eq!(Normal.clamp(), usize::MAX);
        assert_eq!(Pressure.clamp(), PRESSURE_BUF);
        assert_eq!(High.clamp(), HIGH_BUF);
    }

    #[test]
    fn the_total_is_the_workers_sums_and_one_worker_counts_a_change() {
        let lim = TcpMemLimits::from_high(3000);
        let m = TcpMem::new(3);
        m.publish(0, 1000);
        m.publish(2, 1500);
        assert_eq!(m.total(), 2500);
        use MemState::*;
        assert_eq!(m.update(&lim), (Pressure, Some((Normal, Pressure))));
        assert_eq!(m.update(&lim), (Pressure, None));
        m.publish(1, 600);
        assert_eq!(m.update(&lim), (High, Some((Pressure, High))));
        m.publish(0, 0);
        m.publish(1, 0);
        m.publish(2, 0);
        assert_eq!(m.update(&lim), (Normal, Some((High, Normal))));
        assert_eq!(m.state(), MemState::Normal);
    }

    #[test]
    fn defaults_scale_with_the_machine() {
        let d = TcpMemLimits::default();
        assert_eq!(d.high, 128 << 20);
        assert!(d.is_valid());
        assert_eq!(TcpMemLimits::for_memory(64 << 30), d);
        assert_eq!(TcpMemLimits::for_memory(500 << 20).high, 50 << 20);
        assert_eq!(TcpMemLimits::for_memory(1 << 20).high, 8 << 20);
    }
}
