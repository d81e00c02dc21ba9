//! The rules' counters, per worker.

use super::Program;

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
    pub(super) c: Vec<RuleCounter>,
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
        let old: std::collections::HashMap<u32, RuleCounter> = self
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
    pub(super) fn hit(&mut self, len: u32, now: u64) {
        self.packets += 1;
        self.bytes += len as u64;
        self.last = now;
    }
}
