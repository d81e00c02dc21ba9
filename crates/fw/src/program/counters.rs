//! The rules' counters, per worker: [`Counters`], which a worker owns (`&mut`), and
//! [`SharedCounters`], which one worker counts into while `show` reads them from
//! another thread, neither taking a lock.
//!
//! How `eval` counts into either ([`CounterSink`]) and how `show` and `zero` read
//! either ([`CounterSource`]) are traits here; `zero` never writes a worker's
//! counters (see [`SharedCounters`]).

use super::Program;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// One rule's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RuleCounter {
    pub packets: u64,
    pub bytes: u64,
    /// `now` of the last match.
    pub last: u64,
}

/// One worker's rule counters, indexed like its [`Program`]'s rules. Each worker owns
/// one; `show` sums them by rule id. On the first packet under a new program the
/// counters move to its indices (the one allocation; steady state allocates nothing).
#[derive(Clone, Debug, Default)]
pub struct Counters {
    generation: u64,
    ids: Vec<u32>,
    c: Vec<RuleCounter>,
    /// Packets matched by a rule with `log`.
    pub logged: u64,
}

impl Counters {
    pub fn new() -> Self {
        Self::default()
    }

    /// Re-indexes the counters for `prog`, keeping each rule's counts by its id.
    #[inline]
    pub fn sync(&mut self, prog: &Program) {
        if self.generation != prog.generation || self.c.len() != prog.rules.len() {
            self.resync(prog);
        }
    }

    #[cold]
    #[inline(never)]
    fn resync(&mut self, prog: &Program) {
        let old: HashMap<u32, RuleCounter> = self
            .ids
            .iter()
            .copied()
            .zip(self.c.iter().copied())
            .collect();
        self.ids = prog.rules.iter().map(|r| r.rule_id).collect();
        self.c = self
            .ids
            .iter()
            .map(|id| old.get(id).copied().unwrap_or_default())
            .collect();
        self.generation = prog.generation;
    }

    /// The counters of the rule with this id.
    pub fn get(&self, rule_id: u32) -> RuleCounter {
        self.ids
            .iter()
            .position(|&id| id == rule_id)
            .map(|i| self.c[i])
            .unwrap_or_default()
    }

    /// Zeroes the rules whose ids `which` accepts.
    pub fn zero(&mut self, which: impl Fn(u32) -> bool) {
        for (id, c) in self.ids.iter().zip(self.c.iter_mut()) {
            if which(*id) {
                *c = RuleCounter::default();
            }
        }
    }
}

impl RuleCounter {
    #[inline]
    fn hit(&mut self, len: u32, now: u64) {
        self.packets += 1;
        self.bytes += len as u64;
        self.last = now;
    }

    #[inline]
    fn hit_n(&mut self, n: u32, bytes: u64, now: u64) {
        self.packets += n as u64;
        self.bytes += bytes;
        self.last = now;
    }
}

// ---- shared counters ---------------------------------------------------------------

/// One rule's counters in [`SharedCounters`]: 32 bytes, so never across two lines.
#[derive(Debug, Default)]
#[repr(C, align(32))]
struct Cell {
    packets: AtomicU64,
    bytes: AtomicU64,
    last: AtomicU64,
    rule_id: AtomicU32,
}

impl Cell {
    /// The one writer's count: a load and a store each, no read-modify-write (no
    /// lock prefix, no barrier on the fast path).
    #[inline]
    fn hit(&self, len: u32, now: u64) {
        let r = Ordering::Relaxed;
        self.packets.store(self.packets.load(r) + 1, r);
        self.bytes.store(self.bytes.load(r) + len as u64, r);
        self.last.store(now, r);
    }

    #[inline]
    fn hit_n(&self, n: u32, bytes: u64, now: u64) {
        let r = Ordering::Relaxed;
        self.packets.store(self.packets.load(r) + n as u64, r);
        self.bytes.store(self.bytes.load(r) + bytes, r);
        self.last.store(now, r);
    }

    fn read(&self) -> RuleCounter {
        let r = Ordering::Relaxed;
        RuleCounter {
            packets: self.packets.load(r),
            bytes: self.bytes.load(r),
            last: self.last.load(r),
        }
    }

    fn set(&self, rule_id: u32, v: RuleCounter) {
        let r = Ordering::Relaxed;
        self.rule_id.store(rule_id, r);
        self.packets.store(v.packets, r);
        self.bytes.store(v.bytes, r);
        self.last.store(v.last, r);
    }
}

/// Cells of block `k`: `FIRST << k` (blocks are made as programs grow, and kept).
const FIRST: usize = 32;
const BLOCKS: usize = 26;
/// Unused cells at each end of a block (64 bytes): the block's lines hold nothing
/// of another allocation, which another worker might write.
const PAD: usize = 2;

/// One worker's rule counters, counted by that worker (through `&self`, so they can
/// sit in a structure all workers share, one per worker) while another thread reads
/// them for `show`: no lock on either side, no read-modify-write, no line written by
/// two threads.
///
/// - The worker counts with a relaxed load and store per field ([`CounterSink`]):
///   the cost of plain counters. It must be the only thread counting into them; a
///   second one would lose counts (never more: the cells are atomics).
/// - The cells follow the program's rules, as [`Counters`]' do; on the first
///   packet under a new program the worker lays them out again (its one
///   allocation, and a lock only such re-layouts take), under a sequence number
///   that readers check, as a seqlock's readers do.
/// - `show` ([`CounterSource`]) reads them relaxed: a rule's packets and bytes may
///   be one packet apart if the worker counts meanwhile.
/// - `zero` does not write them: [`Ruleset::zero`](crate::Ruleset::zero) records
///   the sums as a baseline that `show` subtracts (the worker stays the one writer;
///   a zero epoch the worker would have to notice would put a check on its path).
#[repr(align(128))]
pub struct SharedCounters {
    /// The program the cells are laid out for (0: none yet).
    generation: AtomicU64,
    /// Odd while the worker lays the cells out again.
    seq: AtomicU64,
    /// Rules laid out, in the block `active`.
    len: AtomicUsize,
    active: AtomicUsize,
    blocks: [OnceLock<Box<[Cell]>>; BLOCKS],
    /// Packets matched by a rule with `log`.
    logged: AtomicU64,
    /// Taken by re-layouts only, so that a second writer (outside the contract)
    /// cannot garble the layout.
    relayout: Mutex<()>,
}

impl Default for SharedCounters {
    fn default() -> Self {
        SharedCounters {
            generation: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            blocks: std::array::from_fn(|_| OnceLock::new()),
            logged: AtomicU64::new(0),
            relayout: Mutex::new(()),
        }
    }
}

impl fmt::Debug for SharedCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCounters")
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .field("rules", &self.len.load(Ordering::Relaxed))
            .field("logged", &self.logged())
            .finish()
    }
}

impl SharedCounters {
    pub fn new() -> Self {
        Self::default()
    }

    /// The cells of `prog`'s rules, laid out for it first if they are not.
    #[inline]
    fn cells(&self, prog: &Program) -> &[Cell] {
        if self.generation.load(Ordering::Acquire) != prog.generation {
            self.lay_out(prog);
        }
        let n = prog.rules.len();
        // Blocks only grow: the active one holds every layout made so far.
        match self.blocks[self.active.load(Ordering::Relaxed)].get() {
            Some(b) => &b[PAD..PAD + n],
            None => &[],
        }
    }

    /// The worker's re-layout for `prog`, keeping each rule's counts by its id.
    #[cold]
    #[inline(never)]
    fn lay_out(&self, prog: &Program) {
        let _g = self.relayout.lock().unwrap_or_else(|e| e.into_inner());
        if self.generation.load(Ordering::Relaxed) == prog.generation {
            return;
        }
        let old: HashMap<u32, RuleCounter> = self.read_all().into_iter().collect();
        let n = prog.rules.len();
        let mut k = self.active.load(Ordering::Relaxed);
        while FIRST << k < n && k + 1 < BLOCKS {
            k += 1;
        }
        let b = self.blocks[k].get_or_init(|| {
            std::iter::repeat_with(Cell::default)
                .take((FIRST << k) + 2 * PAD)
                .collect()
        });
        let s = self.seq.fetch_add(1, Ordering::Relaxed);
        // The odd sequence before the cells change (a seqlock's writer).
        fence(Ordering::Release);
        for (c, r) in b[PAD..].iter().zip(&prog.rules) {
            c.set(r.rule_id, old.get(&r.rule_id).copied().unwrap_or_default());
        }
        self.len.store(n, Ordering::Relaxed);
        self.active.store(k, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
        self.generation.store(prog.generation, Ordering::Release);
    }

    /// Every rule's counters, read as a seqlock's reader (again if the worker was
    /// laying the cells out meanwhile).
    fn read_all(&self) -> Vec<(u32, RuleCounter)> {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1.is_multiple_of(2) {
                let n = self.len.load(Ordering::Relaxed);
                let v = match self.blocks[self.active.load(Ordering::Relaxed)].get() {
                    Some(b) => b[PAD..]
                        .iter()
                        .take(n)
                        .map(|c| (c.rule_id.load(Ordering::Relaxed), c.read()))
                        .collect(),
                    None => Vec::new(),
                };
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return v;
                }
            }
            std::thread::yield_now();
        }
    }

    /// The counters of the rule with this id, as the worker has counted them so far.
    pub fn get(&self, rule_id: u32) -> RuleCounter {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1.is_multiple_of(2) {
                let n = self.len.load(Ordering::Relaxed);
                let v = self.blocks[self.active.load(Ordering::Relaxed)]
                    .get()
                    .and_then(|b| {
                        b[PAD..]
                            .iter()
                            .take(n)
                            .find(|c| c.rule_id.load(Ordering::Relaxed) == rule_id)
                            .map(Cell::read)
                    })
                    .unwrap_or_default();
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return v;
                }
            }
            std::thread::yield_now();
        }
    }

    /// Packets matched by a rule with `log`.
    pub fn logged(&self) -> u64 {
        self.logged.load(Ordering::Relaxed)
    }

    /// A copy, as owned [`Counters`] (for code that wants those).
    pub fn snapshot(&self) -> Counters {
        let (ids, c) = self.read_all().into_iter().unzip();
        Counters {
            generation: 0,
            ids,
            c,
            logged: self.logged(),
        }
    }
}

// ---- how eval counts, how show reads ------------------------------------------------

mod sealed {
    pub trait Sealed {}
    impl Sealed for &mut super::Counters {}
    impl Sealed for &super::SharedCounters {}
}

/// The counters as one call of `eval` or `eval_batch` has them, laid out for its
/// program. (Public in a private module, as the traits below: nameable here only.)
pub trait Tally {
    type Cells<'b>: Cells
    where
        Self: 'b;
    /// The first `n` rules' counters, for one walk.
    fn cells(&mut self, n: usize) -> Self::Cells<'_>;
}

/// One walk's counters: a rule's by its index, and `log`'s.
pub trait Cells {
    fn hit(&mut self, i: usize, len: u32, now: u64);
    fn log(&mut self);
    /// `n` packets of `bytes` in all matched rule `i` (a rule-major run's count).
    fn hit_n(&mut self, i: usize, n: u32, bytes: u64, now: u64);
    fn log_n(&mut self, n: u32);
}

/// Where [`Program::eval`] and [`Program::eval_batch`] count: `&mut Counters` (a
/// worker's own) or `&SharedCounters` (a worker's, which `show` may read
/// meanwhile). Sealed: these two are all.
pub trait CounterSink: sealed::Sealed {
    #[doc(hidden)]
    type Tally<'a>: Tally
    where
        Self: 'a;
    /// The counters laid out for `prog` (checked once per call), to count into.
    #[doc(hidden)]
    fn tally<'a>(&'a mut self, prog: &Program) -> Self::Tally<'a>;
}

#[derive(Debug)]
pub struct OwnTally<'a> {
    c: &'a mut [RuleCounter],
    logged: &'a mut u64,
}

impl Tally for OwnTally<'_> {
    type Cells<'b>
        = OwnTally<'b>
    where
        Self: 'b;

    #[inline(always)]
    fn cells(&mut self, n: usize) -> OwnTally<'_> {
        OwnTally {
            c: &mut self.c[..n],
            logged: &mut *self.logged,
        }
    }
}

impl Cells for OwnTally<'_> {
    #[inline(always)]
    fn hit(&mut self, i: usize, len: u32, now: u64) {
        self.c[i].hit(len, now);
    }

    #[inline(always)]
    fn log(&mut self) {
        *self.logged += 1;
    }

    #[inline(always)]
    fn hit_n(&mut self, i: usize, n: u32, bytes: u64, now: u64) {
        self.c[i].hit_n(n, bytes, now);
    }

    #[inline(always)]
    fn log_n(&mut self, n: u32) {
        *self.logged += n as u64;
    }
}

impl CounterSink for &mut Counters {
    type Tally<'a>
        = OwnTally<'a>
    where
        Self: 'a;

    #[inline(always)]
    fn tally<'a>(&'a mut self, prog: &Program) -> OwnTally<'a> {
        self.sync(prog);
        OwnTally {
            c: &mut self.c,
            logged: &mut self.logged,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct SharedTally<'a> {
    c: &'a [Cell],
    logged: &'a AtomicU64,
}

impl Tally for SharedTally<'_> {
    type Cells<'b>
        = SharedTally<'b>
    where
        Self: 'b;

    #[inline(always)]
    fn cells(&mut self, n: usize) -> SharedTally<'_> {
        SharedTally {
            c: &self.c[..n],
            logged: self.logged,
        }
    }
}

impl Cells for SharedTally<'_> {
    #[inline(always)]
    fn hit(&mut self, i: usize, len: u32, now: u64) {
        self.c[i].hit(len, now);
    }

    #[inline(always)]
    fn log(&mut self) {
        let r = Ordering::Relaxed;
        self.logged.store(self.logged.load(r) + 1, r);
    }

    #[inline(always)]
    fn hit_n(&mut self, i: usize, n: u32, bytes: u64, now: u64) {
        self.c[i].hit_n(n, bytes, now);
    }

    #[inline(always)]
    fn log_n(&mut self, n: u32) {
        let r = Ordering::Relaxed;
        self.logged.store(self.logged.load(r) + n as u64, r);
    }
}

impl CounterSink for &SharedCounters {
    type Tally<'a>
        = SharedTally<'a>
    where
        Self: 'a;

    #[inline(always)]
    fn tally<'a>(&'a mut self, prog: &Program) -> SharedTally<'a> {
        SharedTally {
            c: self.cells(prog),
            logged: &self.logged,
        }
    }
}

/// What [`Ruleset::show`](crate::Ruleset::show), `zero` and `counter` read: a
/// worker's counters, owned or shared (or a mix, as `&dyn CounterSource`).
pub trait CounterSource {
    /// The counters of the rule with this id.
    fn get(&self, rule_id: u32) -> RuleCounter;
}

impl CounterSource for Counters {
    fn get(&self, rule_id: u32) -> RuleCounter {
        Counters::get(self, rule_id)
    }
}

impl CounterSource for SharedCounters {
    fn get(&self, rule_id: u32) -> RuleCounter {
        SharedCounters::get(self, rule_id)
    }
}
