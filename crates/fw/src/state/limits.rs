//! `limit` parents: how many live children each (rule, masked key) has.

use super::flow::Key;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// A `limit` parent's key: the creating rule and the masked flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct ParentKey {
    pub(super) rule_id: u32,
    pub(super) key: Key,
}

/// Parents sized up front for this many; beyond, the map grows (inserts only).
const PARENTS_UP_FRONT: usize = 1024;

/// `limit` parents: live children per (rule, masked key). A parent exists only while
/// it has children, so there are never more parents than states.
pub(super) struct Parents {
    pub(super) count: HashMap<ParentKey, u32>,
}

impl fmt::Debug for Parents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parents")
            .field("parents", &self.count.len())
            .finish()
    }
}

impl Parents {
    pub(super) fn new(max_states: usize) -> Self {
        Parents {
            count: HashMap::with_capacity(max_states.min(PARENTS_UP_FRONT)),
        }
    }
}

/// Where a table finds its `limit` parents: its own, or shared by all shards.
pub(super) trait Limits {
    /// Counts one more child of `k`, unless it has `limit` already.
    fn acquire(&mut self, k: &ParentKey, limit: u32) -> bool;
    /// Counts one child fewer.
    fn release(&mut self, k: &ParentKey);
}

impl Limits for Parents {
    fn acquire(&mut self, k: &ParentKey, limit: u32) -> bool {
        match self.count.get_mut(k) {
            Some(n) if *n >= limit => false,
            Some(n) => {
                *n += 1;
                true
            }
            None if limit == 0 => false,
            None => {
                self.count.insert(*k, 1);
                true
            }
        }
    }

    fn release(&mut self, k: &ParentKey) {
        if let Some(n) = self.count.get_mut(k) {
            *n -= 1;
            if *n == 0 {
                self.count.remove(k);
            }
        }
    }
}

/// The shards' parents, locked for each acquire or release (only `limit` children
/// take the lock). Lock order: a shard, then the parents.
pub(super) struct SharedParents<'a>(pub(super) &'a Mutex<Parents>);

impl Limits for SharedParents<'_> {
    fn acquire(&mut self, k: &ParentKey, limit: u32) -> bool {
        lock(self.0).acquire(k, limit)
    }

    fn release(&mut self, k: &ParentKey) {
        lock(self.0).release(k)
    }
}

/// A poisoned lock still guards consistent data: every update here completes
/// before anything that may panic.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
