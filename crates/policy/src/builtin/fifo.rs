//! FIFO: evict the page that was loaded first.

use crate::{list::SlotList, Fault, FaultKind, Memory, Page, Policy};

/// First in, first out.
#[derive(Debug, Default)]
pub struct Fifo {
    queue: SlotList,
}

impl Fifo {
    /// A new FIFO policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for Fifo {
    fn name(&self) -> String {
        "fifo".into()
    }

    fn on_fault(&mut self, fault: Fault, _mem: &mut dyn Memory) {
        if fault.kind == FaultKind::Missing {
            self.queue.push_back(fault.page.slot);
        }
    }

    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.queue.front().map(|s| mem.page(s))
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        self.queue.remove(page.slot);
    }
}
