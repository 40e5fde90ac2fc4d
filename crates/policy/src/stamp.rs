//! A recency order over page slots kept by timestamps, for the exact
//! policies whose hits reorder pages (exact LRU, ARC's T2).
//!
//! A [`crate::list::SlotList`] moves a page to its back on every hit: on a
//! hit-heavy trace whose hits rarely repeat the last page, that is six
//! scattered writes per reference. Here a hit only stores a fresh stamp in
//! the slot's entry; the oldest slot is found when a victim is wanted, from
//! a min-heap of (stamp, slot) entries brought up to date lazily: a popped
//! entry whose stamp is stale (the slot was used since) goes back in with
//! the slot's current stamp. Stamps are unique and increasing, so the order
//! is exactly the list's: same fronts, same victims.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;

/// The stamp of a slot that is not in the order.
const ABSENT: u64 = 0;

/// Slots ordered by last use, least recent first, with O(1) use and
/// insertion and an amortised O(log n) oldest slot. A slot is in it at most
/// once.
#[derive(Clone, Debug, Default)]
pub struct StampList {
    /// Each slot's last-use stamp, [`ABSENT`] if it is not in the order.
    stamp: Vec<u64>,
    /// The stamp of the heap entry that stands for each slot: older entries
    /// of a slot removed and inserted again are left over and dropped when
    /// they surface.
    queued: Vec<u64>,
    /// Entries (stamp, slot), oldest stamp on top; a present slot's entry
    /// has a stamp no newer than the slot's own.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    len: usize,
    /// The last stamp handed out.
    clock: u64,
}

impl StampList {
    /// An empty order.
    pub fn new() -> Self {
        Self::default()
    }

    fn ensure(&mut self, slot: u32) {
        let need = slot as usize + 1;
        if self.stamp.len() < need {
            let grown = need.max(self.stamp.len() * 2);
            self.stamp.resize(grown, ABSENT);
            self.queued.resize(grown, ABSENT);
        }
    }

    /// Number of slots in the order.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the order is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `slot` is in the order.
    pub fn contains(&self, slot: u32) -> bool {
        self.stamp.get(slot as usize).is_some_and(|&t| t != ABSENT)
    }

    /// Makes `slot` the most recent if it is in the order; returns whether
    /// it was. The hit path: one store, no reordering.
    #[inline]
    pub fn touch(&mut self, slot: u32) -> bool {
        match self.stamp.get_mut(slot as usize) {
            Some(t) if *t != ABSENT => {
                self.clock += 1;
                *t = self.clock;
                true
            }
            _ => false,
        }
    }

    /// Makes each of `slots`, all in the order, the most recent in turn:
    /// a run of hits. One store each, no test of presence.
    #[inline]
    pub fn touch_run(&mut self, slots: &[u32]) {
        let base = self.clock;
        for (k, &slot) in slots.iter().enumerate() {
            debug_assert!(self.contains(slot));
            self.stamp[slot as usize] = base + 1 + k as u64;
        }
        self.clock = base + slots.len() as u64;
    }

    /// Inserts `slot` as the most recent. It must not be in the order.
    pub fn push_back(&mut self, slot: u32) {
        self.ensure(slot);
        debug_assert!(!self.contains(slot));
        self.clock += 1;
        let s = slot as usize;
        self.stamp[s] = self.clock;
        self.queued[s] = self.clock;
        self.heap.push(Reverse((self.clock, slot)));
        self.len += 1;
    }

    /// Makes `slot` the most recent, inserting it if absent.
    pub fn move_to_back(&mut self, slot: u32) {
        if !self.touch(slot) {
            self.push_back(slot);
        }
    }

    /// Removes `slot` if present; returns whether it was.
    pub fn remove(&mut self, slot: u32) -> bool {
        if !self.contains(slot) {
            return false;
        }
        let s = slot as usize;
        self.stamp[s] = ABSENT;
        self.len -= 1;
        // The usual removal is the victim just found on top: drop its entry
        // now so that the heap holds about one entry per present slot.
        if let Some(top) = self.heap.peek_mut() {
            if top.0 .1 == slot && top.0 .0 == self.queued[s] {
                PeekMut::pop(top);
            }
        }
        true
    }

    /// The least recently used slot. Brings the heap's top up to date, so
    /// it needs `&mut self`.
    pub fn front(&mut self) -> Option<u32> {
        loop {
            let mut top = self.heap.peek_mut()?;
            let Reverse((t, slot)) = *top;
            let s = slot as usize;
            let now = self.stamp[s];
            if now == t {
                return Some(slot);
            }
            if now == ABSENT || self.queued[s] != t {
                // Removed, or a leftover of an earlier stay.
                PeekMut::pop(top);
            } else {
                // Used since it was queued: requeue at its current stamp.
                *top = Reverse((now, slot));
                self.queued[s] = now;
            }
        }
    }

    /// Removes and returns the least recently used slot.
    pub fn pop_front(&mut self) -> Option<u32> {
        let slot = self.front()?;
        self.remove(slot);
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list::SlotList;
    use proptest::prelude::*;

    #[test]
    fn test_stamp_list_front_is_least_recently_used() {
        let mut l = StampList::new();
        for s in [3, 1, 4, 0] {
            l.push_back(s);
        }
        assert!(l.touch(3));
        assert!(!l.touch(9));
        assert_eq!(l.front(), Some(1));
        assert!(l.remove(1));
        assert!(!l.remove(1));
        assert_eq!(l.pop_front(), Some(4));
        assert_eq!(l.pop_front(), Some(0));
        assert_eq!(l.pop_front(), Some(3));
        assert_eq!(l.pop_front(), None);
        assert!(l.is_empty());
    }

    #[test]
    fn test_stamp_list_run_of_touches_orders_as_one_by_one() {
        let (mut run, mut single) = (StampList::new(), StampList::new());
        for s in 0..5 {
            run.push_back(s);
            single.push_back(s);
        }
        let hits = [3, 0, 3, 1];
        run.touch_run(&hits);
        for s in hits {
            single.touch(s);
        }
        run.push_back(7);
        single.push_back(7);
        let drain = |l: &mut StampList| std::iter::from_fn(|| l.pop_front()).collect::<Vec<_>>();
        assert_eq!(drain(&mut run), vec![2, 4, 0, 3, 1, 7]);
        assert_eq!(drain(&mut single), vec![2, 4, 0, 3, 1, 7]);
    }

    #[test]
    fn test_stamp_list_slot_removed_and_reinserted_keeps_one_place() {
        let mut l = StampList::new();
        for s in [0, 1, 2] {
            l.push_back(s);
        }
        // 0 leaves from the middle of the heap, comes back newest.
        l.touch(1);
        assert!(l.remove(0));
        l.push_back(0);
        let order: Vec<u32> = std::iter::from_fn(|| l.pop_front()).collect();
        assert_eq!(order, vec![2, 1, 0]);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Touch(u32),
        Move(u32),
        Remove(u32),
        Pop,
        Front,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u32..24).prop_map(Op::Touch),
            2 => (0u32..24).prop_map(Op::Move),
            1 => (0u32..24).prop_map(Op::Remove),
            1 => Just(Op::Pop),
            1 => Just(Op::Front),
        ]
    }

    proptest! {
        /// Every operation leaves the same order as the linked list's.
        #[test]
        fn test_stamp_list_orders_as_slot_list(ops in proptest::collection::vec(op(), 0..400)) {
            let (mut stamps, mut list) = (StampList::new(), SlotList::new());
            for op in ops {
                match op {
                    Op::Touch(s) => {
                        let was = list.contains(s);
                        if was {
                            list.move_to_back(s);
                        }
                        prop_assert_eq!(stamps.touch(s), was);
                    }
                    Op::Move(s) => {
                        list.move_to_back(s);
                        stamps.move_to_back(s);
                    }
                    Op::Remove(s) => prop_assert_eq!(stamps.remove(s), list.remove(s)),
                    Op::Pop => prop_assert_eq!(stamps.pop_front(), list.pop_front()),
                    Op::Front => prop_assert_eq!(stamps.front(), list.front()),
                }
                prop_assert_eq!(stamps.len(), list.len());
            }
        }
    }
}
