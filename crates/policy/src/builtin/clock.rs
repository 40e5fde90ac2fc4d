//! CLOCK, FIFO with second chance: the live approximation of LRU.

use crate::{list::SlotList, Fault, FaultKind, Memory, Page, Policy};

/// FIFO with second chance. Pages enter at the back with their referenced bit
/// set; the victim search takes the front page, and if it was referenced,
/// clears the bit (re-arming reference emulation) and moves it to the back.
///
/// This is also what the live pager runs for "lru": with only referenced bits
/// observable, second chance is the standard approximation of LRU.
#[derive(Debug, Default)]
pub struct Clock {
    ring: SlotList,
}

impl Clock {
    /// A new CLOCK policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for Clock {
    fn name(&self) -> String {
        "clock".into()
    }

    fn on_fault(&mut self, fault: Fault, _mem: &mut dyn Memory) {
        if fault.kind == FaultKind::Missing {
            self.ring.push_back(fault.page.slot);
        }
    }

    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        // Each page is passed over at most once before every bit is clear.
        for _ in 0..=self.ring.len() {
            let front = self.ring.front()?;
            if mem.is_referenced(front) {
                mem.clear_referenced(front);
                self.ring.move_to_back(front);
            } else {
                return Some(mem.page(front));
            }
        }
        self.ring.front().map(|s| mem.page(s))
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        self.ring.remove(page.slot);
    }
}
