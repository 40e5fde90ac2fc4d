//! ARC (Megiddo & Modha, FAST'03): two LRU lists of resident pages, T1 (seen
//! once recently) and T2 (seen at least twice), two ghost lists B1 and B2 of
//! pages recently evicted from each, and a target size `p` for T1 that a hit
//! in B1 grows (recency pays) and a hit in B2 shrinks (frequency pays).
//!
//! Exact ARC moves a page to T2 on every hit, which a live pager does not
//! see: this is a simulator-only reference. [`super::Car`] is its live
//! counterpart.
//!
//! T1 only gains pages at its back (a hit leaves it for T2), so it stays a
//! linked list; T2 is reordered by every hit in it, so its recency is a
//! [`StampList`]: a hit in T2 stores a stamp, no list move.

use crate::{
    list::SlotList, stamp::StampList, Fault, FaultKind, Memory, Page, Policy, ReferencePolicy,
};

/// What the pending miss found in the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Miss {
    /// In neither ghost list.
    New,
    /// In B1 (a recency ghost).
    GhostRecent,
    /// In B2 (a frequency ghost).
    GhostFrequent,
}

/// Adaptive Replacement Cache.
#[derive(Debug)]
pub struct Arc {
    t1: SlotList,
    t2: StampList,
    b1: SlotList,
    b2: SlotList,
    /// Target size of T1.
    p: usize,
    /// Cache size c (the frames held).
    c: usize,
    /// The miss being served, from `on_reference` to `on_fault`.
    miss: Miss,
    /// ARC case IV with T1 = c: the victim from T1 leaves no ghost.
    drop_ghost: bool,
}

impl Arc {
    /// A new ARC policy for `frames` frames.
    pub fn new(frames: usize) -> Self {
        Arc {
            t1: SlotList::new(),
            t2: StampList::new(),
            b1: SlotList::new(),
            b2: SlotList::new(),
            p: 0,
            c: frames.max(1),
            miss: Miss::New,
            drop_ghost: false,
        }
    }

    /// The current target size of T1.
    pub fn target_recent(&self) -> usize {
        self.p
    }

    /// Keeps the directory within ARC's bounds: |T1|+|B1| <= c and
    /// |T1|+|T2|+|B1|+|B2| <= 2c (needed when frames are reclaimed).
    fn trim(&mut self) {
        while self.t1.len() + self.b1.len() > self.c && self.b1.pop_front().is_some() {}
        let total = |a: &Self| a.t1.len() + a.t2.len() + a.b1.len() + a.b2.len();
        while total(self) > 2 * self.c
            && (self.b2.pop_front().is_some() || self.b1.pop_front().is_some())
        {}
    }
}

impl Policy for Arc {
    fn name(&self) -> String {
        "arc".into()
    }

    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        if fault.kind != FaultKind::Missing {
            return;
        }
        self.c = mem.capacity().max(1);
        let slot = fault.page.slot;
        self.drop_ghost = false;
        if self.b1.remove(slot) || self.b2.remove(slot) {
            self.t2.push_back(slot);
        } else {
            self.t1.push_back(slot);
        }
        self.trim();
    }

    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.c = mem.capacity().max(1);
        let in_b2 = self.b2.contains(incoming.slot);
        let t1 = self.t1.len();
        let from_t1 = t1 > 0 && (t1 > self.p || (in_b2 && t1 == self.p) || self.t2.is_empty());
        let chosen = if from_t1 || self.drop_ghost {
            self.t1.front()
        } else {
            self.t2.front()
        };
        match chosen {
            Some(s) => Some(s),
            None => self.t2.front(),
        }
        .map(|s| mem.page(s))
    }

    fn on_forget(&mut self, page: Page) {
        self.b1.remove(page.slot);
        self.b2.remove(page.slot);
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        let slot = page.slot;
        if self.t1.remove(slot) {
            if !std::mem::take(&mut self.drop_ghost) {
                self.b1.push_back(slot);
            }
        } else if self.t2.remove(slot) {
            self.b2.push_back(slot);
        }
        self.trim();
    }
}

impl ReferencePolicy for Arc {
    fn on_hits(&mut self, slots: &[u32], _first_index: u64, _vpns: &[u64]) {
        // Case I only: a resident page is in T1 or T2.
        for &slot in slots {
            if !self.t2.touch(slot) {
                self.t1.remove(slot);
                self.t2.push_back(slot);
            }
        }
    }

    fn on_reference(&mut self, page: Page, _index: u64) {
        let slot = page.slot;
        // Case I: a hit moves the page to the MRU end of T2.
        if self.t2.touch(slot) {
            return;
        }
        if self.t1.remove(slot) {
            self.t2.push_back(slot);
            return;
        }
        let (b1, b2) = (self.b1.len(), self.b2.len());
        self.miss = if self.b1.contains(slot) {
            // Case II: recency would have hit; favour T1.
            self.p = (self.p + (b2 / b1).max(1)).min(self.c);
            Miss::GhostRecent
        } else if self.b2.contains(slot) {
            // Case III: frequency would have hit; favour T2.
            self.p = self.p.saturating_sub((b1 / b2).max(1));
            Miss::GhostFrequent
        } else {
            Miss::New
        };
        if self.miss == Miss::New {
            // Case IV: make room in the directory before the page enters T1.
            if self.t1.len() + b1 >= self.c {
                if self.t1.len() < self.c {
                    self.b1.pop_front();
                } else {
                    self.drop_ghost = true;
                }
            } else if self.t1.len() + self.t2.len() + b1 + b2 >= 2 * self.c {
                self.b2.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testbed::Testbed;

    /// Hits on recency ghosts (B1) raise p, hits on frequency ghosts (B2)
    /// lower it again.
    #[test]
    fn test_arc_adapts_p_toward_recency_then_frequency() {
        let frames = 4;
        let mut arc = Arc::new(frames);
        let mut bed = Testbed::new(64, frames);
        // Two pages in T2, then a loop over 3 pages that T1 (2 frames left)
        // cannot hold: each miss is a B1 ghost hit and grows p.
        let mut refs = vec![0, 1, 0, 1];
        refs.extend([10, 11, 12].iter().cycle().take(12));
        bed.run_reference(&mut arc, &refs);
        let after_recency = arc.target_recent();
        assert!(after_recency > 0, "p stayed 0 on a recency workload");

        // A frequent set of 4 pages, each touched twice (T2), then a scan
        // that pushes them out to B2, then the frequent set again.
        let mut refs = Vec::new();
        for round in 0..4 {
            refs.extend([20, 21, 22, 23, 20, 21, 22, 23]);
            refs.extend((0..4).map(|i| 30 + round * 4 + i));
        }
        bed.run_reference(&mut arc, &refs);
        assert!(
            arc.target_recent() < after_recency,
            "p {} did not shrink from {after_recency}",
            arc.target_recent()
        );
    }

    /// Worked by hand, c = 2: refs a b a c. `a` is hit (T2), `b` in T1;
    /// with p = 0, T1 is over target, so `c` evicts `b` into B1. Then `b`
    /// again is a B1 ghost hit: p rises to 1 and `b` enters T2.
    #[test]
    fn test_arc_ghost_hit_in_b1_raises_p_and_enters_t2() {
        let (a, b, c) = (0, 1, 2);
        let mut arc = Arc::new(2);
        let mut bed = Testbed::new(3, 2);
        bed.run_reference(&mut arc, &[a, b, a, c]);
        assert_eq!(bed.evicted, vec![b]);
        assert!(arc.b1.contains(b));
        bed.access_reference(&mut arc, b, 4);
        assert_eq!(arc.target_recent(), 1);
        assert!(arc.t2.contains(b));
        // T1 = {c} is at target p = 1, `b` was not in B2: T2's LRU `a` went.
        assert_eq!(bed.evicted, vec![b, a]);
    }

    /// A scan longer than the cache cannot flush pages that were hit twice.
    #[test]
    fn test_arc_is_scan_resistant() {
        let frames = 4;
        let mut arc = Arc::new(frames);
        let mut bed = Testbed::new(128, frames);
        let mut refs = vec![0, 1, 0, 1];
        refs.extend(10..100);
        refs.extend([0, 1]);
        bed.run_reference(&mut arc, &refs);
        assert_eq!(bed.faults, 2 + 90, "the hot pair survived the scan");
    }
}
