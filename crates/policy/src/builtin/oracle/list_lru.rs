//! Exact LRU as it was before [`super::super::ExactLru`] kept stamps: a
//! linked list moved on every hit, the oracle its victims are checked against.

use crate::{list::SlotList, Fault, Memory, Page, Policy, ReferencePolicy};

/// Exact least-recently-used over a linked list.
#[derive(Debug, Default)]
pub struct ListLru {
    recency: SlotList,
}

impl ListLru {
    /// A new exact LRU policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for ListLru {
    fn name(&self) -> String {
        "list-lru".into()
    }

    fn on_fault(&mut self, fault: Fault, _mem: &mut dyn Memory) {
        self.recency.move_to_back(fault.page.slot);
    }

    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.recency.front().map(|s| mem.page(s))
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        self.recency.remove(page.slot);
    }
}

impl ReferencePolicy for ListLru {
    fn on_hits(&mut self, slots: &[u32], _first_index: u64, _vpns: &[u64]) {
        // A resident page is always in the list.
        for &slot in slots {
            self.recency.move_to_back(slot);
        }
    }

    fn on_reference(&mut self, page: Page, _index: u64) {
        if self.recency.contains(page.slot) {
            self.recency.move_to_back(page.slot);
        }
    }
}
