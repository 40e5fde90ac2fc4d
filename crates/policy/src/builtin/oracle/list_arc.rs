//! ARC as it was before [`super::super::Arc`] kept T2 by stamps: T1 and T2
//! linked lists, a hit moving its page to T2's back. The oracle the new
//! ARC's victims are checked against; the code is the old one unchanged.

use crate::{list::SlotList, Fault, FaultKind, Memory, Page, Policy, ReferencePolicy};

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
pub struct ListArc {
    t1: SlotList,
    t2: SlotList,
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

impl ListArc {
    /// A new ARC policy for `frames` frames.
    pub fn new(frames: usize) -> Self {
        ListArc {
            t1: SlotList::new(),
            t2: SlotList::new(),
            b1: SlotList::new(),
            b2: SlotList::new(),
            p: 0,
            c: frames.max(1),
            miss: Miss::New,
            drop_ghost: false,
        }
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

impl Policy for ListArc {
    fn name(&self) -> String {
        "list-arc".into()
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
        let list = if from_t1 || self.drop_ghost {
            &self.t1
        } else {
            &self.t2
        };
        list.front()
            .or_else(|| self.t2.front())
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

impl ReferencePolicy for ListArc {
    fn on_hits(&mut self, slots: &[u32], _first_index: u64, _vpns: &[u64]) {
        // Case I only: a resident page is in T1 or T2.
        for &slot in slots {
            if self.t2.back() != Some(slot) {
                self.t1.remove(slot);
                self.t2.move_to_back(slot);
            }
        }
    }

    fn on_reference(&mut self, page: Page, _index: u64) {
        let slot = page.slot;
        if self.t1.remove(slot) || self.t2.contains(slot) {
            // Case I: a hit moves the page to the MRU end of T2.
            self.t2.move_to_back(slot);
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
