//! CAR, Clock with Adaptive Replacement (Bansal & Modha, FAST'04): ARC with
//! its two LRU lists of resident pages replaced by two clocks, so that a hit
//! only sets a referenced bit. That makes it the live counterpart of
//! [`super::Arc`].
//!
//! T1 holds pages seen once recently, T2 pages seen at least twice; B1 and B2
//! are ghost LRU lists of pages evicted from each, and `p`, the target size
//! of T1, grows on a B1 ghost hit and shrinks on a B2 ghost hit. The clock
//! hands are the fronts of the T1 and T2 queues. A page enters with its
//! referenced bit cleared (the bit the missing fault set is not a hit), so
//! its next access is a minor fault that marks it referenced.

use crate::{list::SlotList, Fault, FaultKind, Memory, Page, Policy};

/// Clock with Adaptive Replacement.
#[derive(Debug, Default)]
pub struct Car {
    t1: SlotList,
    t2: SlotList,
    b1: SlotList,
    b2: SlotList,
    /// Target size of T1.
    p: usize,
}

impl Car {
    /// A new CAR policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current target size of T1.
    pub fn target_recent(&self) -> usize {
        self.p
    }

    /// CAR's history replacement for a page in neither ghost list, bounded
    /// by `c` frames: |T1|+|B1| <= c and |T1|+|T2|+|B1|+|B2| <= 2c.
    fn trim_history(&mut self, c: usize) {
        while self.t1.len() + self.b1.len() > c && self.b1.pop_front().is_some() {}
        let total = |a: &Self| a.t1.len() + a.t2.len() + a.b1.len() + a.b2.len();
        while total(self) > 2 * c
            && (self.b2.pop_front().is_some() || self.b1.pop_front().is_some())
        {}
    }
}

impl Policy for Car {
    fn name(&self) -> String {
        "car".into()
    }

    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        if fault.kind != FaultKind::Missing {
            return;
        }
        let slot = fault.page.slot;
        let c = mem.capacity().max(1);
        let (b1, b2) = (self.b1.len(), self.b2.len());
        if self.b1.remove(slot) {
            self.p = (self.p + (b2 / b1).max(1)).min(c);
            self.t2.push_back(slot);
        } else if self.b2.remove(slot) {
            self.p = self.p.saturating_sub((b1 / b2).max(1));
            self.t2.push_back(slot);
        } else {
            // The page is about to join T1: make room for it in the history.
            if self.t1.len() + self.b1.len() >= c {
                self.b1.pop_front();
            } else if self.t1.len() + self.t2.len() + b1 + b2 >= 2 * c {
                self.b2.pop_front();
            }
            self.t1.push_back(slot);
        }
        mem.clear_referenced(slot);
        self.trim_history(c);
    }

    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        // Every turn clears a bit or returns, so two turns per page suffice.
        for _ in 0..=2 * (self.t1.len() + self.t2.len()) {
            if !self.t1.is_empty() && (self.t1.len() >= self.p.max(1) || self.t2.is_empty()) {
                let head = self.t1.front()?;
                if !mem.is_referenced(head) {
                    return Some(mem.page(head));
                }
                // Referenced in T1: it has been seen twice, promote to T2.
                mem.clear_referenced(head);
                self.t1.remove(head);
                self.t2.push_back(head);
            } else {
                let head = self.t2.front()?;
                if !mem.is_referenced(head) {
                    return Some(mem.page(head));
                }
                mem.clear_referenced(head);
                self.t2.move_to_back(head);
            }
        }
        self.t1.front().or(self.t2.front()).map(|s| mem.page(s))
    }

    fn on_forget(&mut self, page: Page) {
        self.b1.remove(page.slot);
        self.b2.remove(page.slot);
    }

    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        let slot = page.slot;
        if self.t1.remove(slot) {
            self.b1.push_back(slot);
        } else if self.t2.remove(slot) {
            self.b2.push_back(slot);
        }
        // Ghost lists may have to shrink after a reclaim took frames.
        self.trim_history(mem.capacity().max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testbed::Testbed;

    /// Worked by hand, c = 2: refs a b a c. The hit on `a` sets its bit;
    /// `c`'s fault finds |T1| = 2 >= max(1, p = 0): the hand promotes `a` to
    /// T2 and evicts `b` into B1. `b` again is a B1 ghost hit: p rises to 1,
    /// `b` enters T2; the victim, chosen before p adapts, is `c`
    /// (T1 = {c}, |T1| >= max(1, 0)).
    #[test]
    fn test_car_promotes_referenced_pages_and_learns_from_b1() {
        let (a, b, c) = (0, 1, 2);
        let mut car = Car::new();
        let mut bed = Testbed::new(3, 2);
        bed.run(&mut car, &[a, b, a, c]);
        assert_eq!(bed.evicted, vec![b]);
        assert!(car.t2.contains(a) && car.b1.contains(b));
        bed.access(&mut car, b, 4);
        assert_eq!(car.target_recent(), 1);
        assert!(car.t2.contains(b));
        assert_eq!(bed.evicted, vec![b, c]);
    }

    /// Recency ghost hits raise p; frequency ghost hits lower it again.
    #[test]
    fn test_car_adapts_p_toward_recency_then_frequency() {
        let frames = 4;
        let mut car = Car::new();
        let mut bed = Testbed::new(64, frames);
        let mut refs = vec![0, 1, 0, 1];
        refs.extend([10, 11, 12].iter().cycle().take(12));
        bed.run(&mut car, &refs);
        let after_recency = car.target_recent();
        assert!(after_recency > 0, "p stayed 0 on a recency workload");

        let mut refs = Vec::new();
        for round in 0..4 {
            refs.extend([20, 21, 22, 23, 20, 21, 22, 23]);
            refs.extend((0..4).map(|i| 30 + round * 4 + i));
        }
        bed.run(&mut car, &refs);
        assert!(car.target_recent() < after_recency);
    }

    /// A scan longer than the cache cannot flush pages that were reused.
    #[test]
    fn test_car_is_scan_resistant() {
        let mut car = Car::new();
        let mut bed = Testbed::new(128, 4);
        let mut refs = vec![0, 1, 0, 1];
        refs.extend(10..100);
        refs.extend([0, 1]);
        bed.run(&mut car, &refs);
        assert_eq!(bed.faults, 2 + 90, "the hot pair survived the scan");
    }
}
