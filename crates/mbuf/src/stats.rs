//! Pullup/pulldown counters, per thread (per worker), summed by whoever reads
//! them — the columns of Table 2 in the m_pulldown paper (Freenix 2000).
//!
//! Units, as the paper's `PULLDOWN_STAT` counters:
//! - `calls`: every call of the strategy;
//! - `len_checks`: length checks made (one per call, plus those a caller counted
//!   with [`count_len_check`] because the bytes were already at hand);
//! - `allocs`: buffers allocated by the calls;
//! - `copies`: copy operations — one per contiguous destination filled, however
//!   many source segments it gathered from (the paper's "copy" column);
//! - `bytes_copied`: the exact number of bytes moved, the cost the `copies`
//!   column only hints at;
//! - `fails`: calls that returned an error (for `pullup`, `len > MHLEN`: the
//!   paper's "fail" column).

use std::cell::{Cell, RefCell};

/// Counters of one strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PullStats {
    pub calls: u64,
    pub len_checks: u64,
    pub allocs: u64,
    pub copies: u64,
    pub bytes_copied: u64,
    pub fails: u64,
}

impl PullStats {
    const ZERO: PullStats = PullStats {
        calls: 0,
        len_checks: 0,
        allocs: 0,
        copies: 0,
        bytes_copied: 0,
        fails: 0,
    };
}

impl std::ops::AddAssign for PullStats {
    fn add_assign(&mut self, o: PullStats) {
        self.calls += o.calls;
        self.len_checks += o.len_checks;
        self.allocs += o.allocs;
        self.copies += o.copies;
        self.bytes_copied += o.bytes_copied;
        self.fails += o.fails;
    }
}

/// Counters of the three strategies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MbufStats {
    /// KAME `m_pulldown`: [`Mbuf::pulldown`](crate::Mbuf::pulldown).
    pub pulldown: PullStats,
    /// 4.4BSD `m_pullup`: [`Mbuf::pullup`](crate::Mbuf::pullup).
    pub pullup: PullStats,
    /// NRL `m_pullup2`: [`Mbuf::pullup2`](crate::Mbuf::pullup2).
    pub pullup2: PullStats,
}

impl std::ops::AddAssign for MbufStats {
    fn add_assign(&mut self, o: MbufStats) {
        self.pulldown += o.pulldown;
        self.pullup += o.pullup;
        self.pullup2 += o.pullup2;
    }
}

thread_local! {
    static STATS: RefCell<MbufStats> = const {
        RefCell::new(MbufStats {
            pulldown: PullStats::ZERO,
            pullup: PullStats::ZERO,
            pullup2: PullStats::ZERO,
        })
    };
}

/// One of the three ways of making a header contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Pulldown,
    Pullup,
    Pullup2,
}

#[inline]
pub(crate) fn bump(which: Strategy, f: impl FnOnce(&mut PullStats)) {
    STATS.with(|s| {
        let mut s = s.borrow_mut();
        f(match which {
            Strategy::Pulldown => &mut s.pulldown,
            Strategy::Pullup => &mut s.pullup,
            Strategy::Pullup2 => &mut s.pullup2,
        })
    });
}

thread_local! {
    /// The length checks that needed no call, per strategy: counted on every header
    /// access of the input path, so in plain cells (a thread-local load and store),
    /// not through the `RefCell` the rarer counts share.
    static LEN_CHECKS: [Cell<u64>; 3] = const { [Cell::new(0), Cell::new(0), Cell::new(0)] };
}

/// This thread's counters.
pub fn snapshot() -> MbufStats {
    let mut m = STATS.with(|s| *s.borrow());
    LEN_CHECKS.with(|c| {
        m.pulldown.len_checks += c[Strategy::Pulldown as usize].get();
        m.pullup.len_checks += c[Strategy::Pullup as usize].get();
        m.pullup2.len_checks += c[Strategy::Pullup2 as usize].get();
    });
    m
}

/// Zeroes this thread's counters.
pub fn reset() {
    STATS.with(|s| *s.borrow_mut() = MbufStats::default());
    LEN_CHECKS.with(|c| c.iter().for_each(|c| c.set(0)));
}

/// Counts a length check that needed no call (the bytes were already contiguous
/// and the caller checked that itself), under `pulldown`, the stack's strategy.
#[inline]
pub fn count_len_check() {
    count_len_check_of(Strategy::Pulldown);
}

/// Counts a length check that needed no call, under strategy `which`.
#[inline]
pub fn count_len_check_of(which: Strategy) {
    LEN_CHECKS.with(|c| {
        let c = &c[which as usize];
        c.set(c.get() + 1);
    });
}
