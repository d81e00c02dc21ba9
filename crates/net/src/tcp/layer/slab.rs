//! Slots that keep their indexes ([`Slab`]), for the connection table and the timers
//! to name connections and TIME_WAIT remnants by. Generic; calls nothing.

/// Slots that keep their indexes, for the connection table and the timers to name:
/// a freed slot is reused, its generation bumped so that a timer entry naming its
/// old occupant is told apart. An occupant may be held out of its slot (`take`, then
/// put back) while it is worked on.
pub(super) struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
    gens: Vec<u32>,
}

impl<T> Slab<T> {
    pub(super) fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            gens: Vec::new(),
        }
    }

    /// Puts `v` in a free slot; returns the slot.
    pub(super) fn insert(&mut self, v: T) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(v);
                i
            }
            None => {
                self.slots.push(Some(v));
                self.gens.push(0);
                self.slots.len() - 1
            }
        }
    }

    /// Frees slot `i` (occupied, or its occupant held out); returns what was in it.
    pub(super) fn remove(&mut self, i: usize) -> Option<T> {
        self.gens[i] = self.gens[i].wrapping_add(1);
        self.free.push(i);
        self.slots[i].take()
    }

    /// Slot `i`'s generation (a slot that exists).
    pub(super) fn gen(&self, i: usize) -> u32 {
        self.gens[i]
    }

    /// Whether `g` is slot `i`'s generation: an entry naming it is current.
    pub(super) fn is_current(&self, i: usize, g: u32) -> bool {
        self.gens.get(i) == Some(&g)
    }

    /// Every occupant (not those held out).
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    /// Slots, occupied or free: the indexes are `0..slots()`.
    pub(super) fn slots(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn get(&self, i: usize) -> Option<&T> {
        self.slots.get(i).and_then(Option::as_ref)
    }

    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.slots.get_mut(i).and_then(Option::as_mut)
    }

    /// Holds slot `i`'s occupant out of it, to [`Slab::put_back`].
    pub(super) fn take(&mut self, i: usize) -> Option<T> {
        self.slots.get_mut(i).and_then(Option::take)
    }

    pub(super) fn put_back(&mut self, i: usize, v: T) {
        self.slots[i] = Some(v);
    }
}
