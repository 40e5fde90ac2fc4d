//! Exact LRU: a simulator-only reference, it needs every reference.
//!
//! Recency is a [`StampList`]: a hit stores a stamp, and the least recent
//! page is found only when a victim is wanted (a hit-heavy trace pays one
//! store per hit instead of a list move).

use crate::{stamp::StampList, Fault, Memory, Page, Policy, ReferencePolicy};

/// Exact least-recently-used. Sees every reference, so it runs only in the
/// simulator; the live pager runs [`super::Clock`] for "lru".
#[derive(Debug, Default)]
pub struct ExactLru {
    recency: StampList,
}

impl ExactLru {
    /// A new exact LRU policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// The least recently used resident slot.
    pub fn least_recent(&mut self) -> Option<u32> {
        self.recency.front()
    }
}

impl Policy for ExactLru {
    fn name(&self) -> String {
        "lru".into()
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

impl ReferencePolicy for ExactLru {
    fn on_hits(&mut self, slots: &[u32], _first_index: u64, _vpns: &[u64]) {
        // A resident page is always in the order.
        self.recency.touch_run(slots);
    }

    fn on_reference(&mut self, page: Page, _index: u64) {
        self.recency.touch(page.slot);
    }
}
