//! 2Q, full version (Johnson & Shasha, VLDB'94): new pages enter a FIFO
//! A1in; pages leaving A1in are remembered in a ghost FIFO A1out; a fault
//! on a page remembered in A1out puts it in Am, an LRU list. Memory is taken
//! from A1in while it holds more than Kin pages (paper: 25% of the frames),
//! otherwise from Am's LRU end. A1out remembers Kout pages (paper: 50%).
//!
//! Am is exact LRU over every reference: a simulator-only reference.

use crate::{list::SlotList, Fault, FaultKind, Memory, Page, Policy, ReferencePolicy};

/// Two-queue replacement.
#[derive(Debug, Default)]
pub struct TwoQueue {
    a1in: SlotList,
    a1out: SlotList,
    am: SlotList,
    kin_percent: usize,
    kout_percent: usize,
    /// The page being loaded was in A1out when its fault asked for a frame:
    /// it goes to Am even if making room pushed it out of A1out.
    remembered: Option<u32>,
}

impl TwoQueue {
    /// A new 2Q policy with Kin and Kout as percentages of the frames,
    /// clamped to 1..=100 and 1..=400.
    pub fn new(kin_percent: usize, kout_percent: usize) -> Self {
        TwoQueue {
            kin_percent: kin_percent.clamp(1, 100),
            kout_percent: kout_percent.clamp(1, 400),
            ..Self::default()
        }
    }

    fn kin(&self, frames: usize) -> usize {
        (frames * self.kin_percent / 100).max(1)
    }

    fn kout(&self, frames: usize) -> usize {
        (frames * self.kout_percent / 100).max(1)
    }
}

impl Policy for TwoQueue {
    fn name(&self) -> String {
        "2q".into()
    }

    fn on_fault(&mut self, fault: Fault, _mem: &mut dyn Memory) {
        if fault.kind != FaultKind::Missing {
            return;
        }
        let slot = fault.page.slot;
        let remembered = self.remembered.take() == Some(slot);
        if self.a1out.remove(slot) || remembered {
            self.am.push_back(slot);
        } else {
            self.a1in.push_back(slot);
        }
    }

    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        if self.a1out.contains(incoming.slot) {
            self.remembered = Some(incoming.slot);
        }
        let take_a1in = self.a1in.len() > self.kin(mem.capacity()) || self.am.is_empty();
        let from = if take_a1in { &self.a1in } else { &self.am };
        from.front().map(|s| mem.page(s))
    }

    fn on_forget(&mut self, page: Page) {
        self.a1out.remove(page.slot);
        if self.remembered == Some(page.slot) {
            self.remembered = None;
        }
    }

    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        let slot = page.slot;
        if self.a1in.remove(slot) {
            self.a1out.push_back(slot);
            while self.a1out.len() > self.kout(mem.capacity()) {
                self.a1out.pop_front();
            }
        } else {
            // Pages leaving Am are not remembered: they were not used lately.
            self.am.remove(slot);
        }
    }
}

impl ReferencePolicy for TwoQueue {
    fn on_reference(&mut self, page: Page, _index: u64) {
        // A hit in A1in changes nothing: correlated references stay there.
        if self.am.contains(page.slot) {
            self.am.move_to_back(page.slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testbed::Testbed;

    /// Worked by hand, 4 frames (Kin 1, Kout 2): a b c d fill A1in; e takes
    /// a (A1in over Kin), f takes b, pushing A1out to {a, b}; a again is an
    /// A1out hit and enters Am after taking c.
    #[test]
    fn test_two_queue_remembered_page_enters_am() {
        let mut q = TwoQueue::new(25, 50);
        let mut bed = Testbed::new(8, 4);
        bed.run_reference(&mut q, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(bed.evicted, vec![0, 1]);
        assert_eq!(q.a1out.iter().collect::<Vec<_>>(), vec![0, 1]);
        bed.access_reference(&mut q, 0, 6);
        assert!(q.am.contains(0));
        assert_eq!(bed.evicted, vec![0, 1, 2]);
        // A1out now {1, 2}: Kout = 2 dropped nothing else.
        assert_eq!(q.a1out.iter().collect::<Vec<_>>(), vec![1, 2]);
    }

    /// Pages in Am survive a long scan, which passes through A1in alone.
    #[test]
    fn test_two_queue_scan_does_not_flush_am() {
        let mut q = TwoQueue::new(25, 50);
        let mut bed = Testbed::new(200, 8);
        // Get 0 and 1 into Am: touch, push out through A1in, touch again.
        let mut refs = vec![0, 1];
        refs.extend(10..20);
        refs.extend([0, 1]);
        bed.run_reference(&mut q, &refs);
        assert!(q.am.contains(0) && q.am.contains(1));
        let before = bed.faults;
        let scan: Vec<u32> = (50..150).chain([0, 1]).collect();
        bed.run_reference(&mut q, &scan);
        assert_eq!(bed.faults - before, 100, "0 and 1 hit after the scan");
    }
}
