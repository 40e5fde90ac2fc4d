//! The policy port: every call to a region's policy goes through it, so
//! that each keeps the policy's rules: the pages the frame table stopped
//! remembering are forgotten by the policy before it is called (their slots
//! may name other pages now), and its clock (the fault count) advances with
//! each fault told. The PTEs of pages it clears the referenced bit of are
//! zapped by the region's lock when it is let go (`crate::lock`).

use pagepilot_policy::{Fault, FaultKind, Page, Policy};

use crate::frame_table::FrameTable;

/// A region's policy and its clock.
pub struct PolicyPort {
    policy: Box<dyn Policy>,
    /// Faults told so far: the policy's clock.
    time: u64,
}

impl PolicyPort {
    /// A port to `policy`, its clock at 0.
    pub fn new(policy: Box<dyn Policy>) -> Self {
        PolicyPort { policy, time: 0 }
    }

    /// Tells the policy of the pages `table` stopped remembering.
    fn settle(&mut self, table: &mut FrameTable) {
        if table.has_forgotten() {
            for page in table.take_forgotten() {
                self.policy.on_forget(page);
            }
        }
    }

    /// Tells the policy of a fault on page `s` (a missing fault brings it
    /// in; a minor fault is an access to a page whose referenced bit was
    /// cleared).
    pub fn fault(&mut self, table: &mut FrameTable, s: u32, kind: FaultKind, write: bool) {
        self.time += 1;
        self.settle(table);
        let fault = Fault {
            page: table.page_view(s),
            kind,
            write,
            time: self.time,
        };
        self.policy.on_fault(fault, table);
    }

    /// Tells the policy that page `s` is no longer its own (a victim given
    /// up, or a page pinned).
    pub fn forget_page(&mut self, table: &mut FrameTable, s: u32) {
        self.settle(table);
        let page = table.page_view(s);
        self.policy.on_evict(page, table);
    }

    /// The policy's victim to make room for `incoming` (unchecked: the
    /// caller overrules an answer that is not a resident page).
    pub fn victim(&mut self, table: &mut FrameTable, incoming: u32) -> Option<Page> {
        self.settle(table);
        let page = table.page_view(incoming);
        self.policy.victim(page, table)
    }

    /// The pages the policy gives back when asked for `count` frames
    /// (HiPEC's ReclaimFrame; unchecked, like [`PolicyPort::victim`]).
    pub fn reclaim(&mut self, table: &mut FrameTable, count: usize) -> Vec<Page> {
        self.settle(table);
        self.policy.reclaim(count, table)
    }

    /// What went wrong in the policy (a program stopped by its budget, ...).
    pub fn incidents(&self) -> Vec<String> {
        self.policy.incidents()
    }
}

#[cfg(test)]
#[path = "policy_port_tests.rs"]
mod tests;
