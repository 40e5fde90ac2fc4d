//! Which sequence SEQ replaces from: among sequences of length at least L,
//! the one whose N-th most recent fault is the most recent.
//!
//! An indexed max-heap keyed by that time: updating one sequence's key is
//! O(log X), and visiting the candidates in order (when the best has no
//! resident page to give) walks the heap with a reused scratch heap, so a
//! victim choice allocates nothing once warmed up.

use std::collections::BinaryHeap;

const ABSENT: u32 = u32::MAX;

/// Sequences eligible for replacement, ordered by their N-th most recent fault.
#[derive(Debug, Default)]
pub struct Choice {
    /// Max-heap of `(key, id)`.
    heap: Vec<(u64, u32)>,
    /// Heap index of each id, or ABSENT.
    pos: Vec<u32>,
    /// `(key, heap index)` frontier of an in-order walk.
    frontier: BinaryHeap<(u64, u32)>,
}

impl Choice {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of eligible sequences.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether `id` is eligible.
    pub fn contains(&self, id: u32) -> bool {
        self.pos.get(id as usize).is_some_and(|&p| p != ABSENT)
    }

    /// Inserts `id` with `key`, or changes its key.
    pub fn set(&mut self, id: u32, key: u64) {
        let i = id as usize;
        if self.pos.len() <= i {
            self.pos.resize(i + 1, ABSENT);
        }
        let at = self.pos[i];
        if at == ABSENT {
            self.heap.push((key, id));
            let last = self.heap.len() - 1;
            self.pos[i] = last as u32;
            self.sift_up(last);
        } else {
            let at = at as usize;
            let old = self.heap[at].0;
            self.heap[at].0 = key;
            if key > old {
                self.sift_up(at);
            } else {
                self.sift_down(at);
            }
        }
    }

    /// Removes `id` if present.
    pub fn remove(&mut self, id: u32) {
        if !self.contains(id) {
            return;
        }
        let at = self.pos[id as usize] as usize;
        self.pos[id as usize] = ABSENT;
        let Some(moved) = self.heap.pop() else {
            return;
        };
        if at < self.heap.len() {
            self.heap[at] = moved;
            if at > 0 && self.heap[(at - 1) / 2].0 < moved.0 {
                self.sift_up(at);
            } else {
                self.sift_down(at);
            }
        }
    }

    /// Visits eligible sequences from the most recent key down and returns
    /// the first answer `try_one` gives.
    pub fn first<T>(&mut self, mut try_one: impl FnMut(u32) -> Option<T>) -> Option<T> {
        let &(key, _) = self.heap.first()?;
        self.frontier.clear();
        self.frontier.push((key, 0));
        while let Some((_, at)) = self.frontier.pop() {
            let at = at as usize;
            if let Some(found) = try_one(self.heap[at].1) {
                return Some(found);
            }
            for child in [2 * at + 1, 2 * at + 2] {
                if let Some(&(k, _)) = self.heap.get(child) {
                    self.frontier.push((k, child as u32));
                }
            }
        }
        None
    }

    fn place(&mut self, at: usize) {
        self.pos[self.heap[at].1 as usize] = at as u32;
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.heap[parent].0 >= self.heap[at].0 {
                break;
            }
            self.heap.swap(parent, at);
            self.place(at);
            at = parent;
        }
        self.place(at);
    }

    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (l, r) = (2 * at + 1, 2 * at + 2);
            let mut best = at;
            if l < self.heap.len() && self.heap[l].0 > self.heap[best].0 {
                best = l;
            }
            if r < self.heap.len() && self.heap[r].0 > self.heap[best].0 {
                best = r;
            }
            if best == at {
                break;
            }
            self.heap.swap(best, at);
            self.place(at);
            at = best;
        }
        self.place(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn test_choice_visits_in_key_order(ops in proptest::collection::vec((0u32..16, 0u64..50, any::<bool>()), 0..200)) {
            let mut c = Choice::new();
            let mut model = std::collections::BTreeMap::new();
            for (id, key, insert) in ops {
                if insert {
                    c.set(id, key);
                    model.insert(id, key);
                } else {
                    c.remove(id);
                    model.remove(&id);
                }
                prop_assert_eq!(c.len(), model.len());
            }
            let mut seen = Vec::new();
            let none: Option<()> = c.first(|id| { seen.push(id); None });
            prop_assert!(none.is_none());
            let keys: Vec<u64> = seen.iter().map(|id| model[id]).collect();
            let mut sorted = keys.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            prop_assert_eq!(keys, sorted);
            prop_assert_eq!(seen.len(), model.len());
        }
    }
}
