//! MRU: evict the most recently used page (the nested-loops join's policy).

use crate::{list::SlotList, Fault, FaultKind, Memory, Page, Policy, ReferencePolicy};

/// Exact most-recently-used, over every reference: simulator-only.
#[derive(Debug, Default)]
pub struct ExactMru {
    recency: SlotList,
}

impl ExactMru {
    /// A new exact MRU policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for ExactMru {
    fn name(&self) -> String {
        "mru".into()
    }

    fn on_fault(&mut self, fault: Fault, _mem: &mut dyn Memory) {
        self.recency.move_to_back(fault.page.slot);
    }

    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.recency
            .back()
            .filter(|&s| s != incoming.slot)
            .map(|s| mem.page(s))
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        self.recency.remove(page.slot);
    }
}

impl ReferencePolicy for ExactMru {
    fn on_reference(&mut self, page: Page, _index: u64) {
        if self.recency.contains(page.slot) {
            self.recency.move_to_back(page.slot);
        }
    }
}

/// MRU as a live pager sees it: evict the page that faulted in most
/// recently. Hits are invisible to it, so on the join it faults once more
/// per scan than exact MRU: O + (O - M + 1)(Loop - 1).
#[derive(Debug, Default)]
pub struct FaultMru {
    recency: SlotList,
}

impl FaultMru {
    /// A new fault-observed MRU policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for FaultMru {
    fn name(&self) -> String {
        "mru-live".into()
    }

    fn on_fault(&mut self, fault: Fault, _mem: &mut dyn Memory) {
        if fault.kind == FaultKind::Missing {
            self.recency.push_back(fault.page.slot);
        }
    }

    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.recency.back().map(|s| mem.page(s))
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        self.recency.remove(page.slot);
    }
}
