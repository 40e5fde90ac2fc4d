//! The policy's view of the frame table ([`Memory`]): slots, residency,
//! referenced and modified bits, frame grants and flush requests.

use pagepilot_policy::{Memory, Page};

use super::{code, FrameTable, State, MODIFIED, NO_PAGE, REFERENCED, STATE_MASK};

impl Memory for FrameTable {
    fn slots(&self) -> usize {
        self.page_in.len()
    }
    fn capacity(&self) -> usize {
        // Pinned pages are held outside the policy: it has what they leave.
        self.usable().max(1)
    }
    fn resident(&self) -> usize {
        self.resident
    }
    fn is_resident(&self, slot: u32) -> bool {
        self.slot_bits(slot) & STATE_MASK == code(State::Resident)
    }
    fn page(&self, slot: u32) -> Page {
        let page = self.page_in.get(slot as usize).copied().unwrap_or(NO_PAGE);
        Page {
            slot,
            vpn: if page == NO_PAGE {
                u64::MAX
            } else {
                u64::from(page)
            },
        }
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        let page = u32::try_from(vpn).ok()?;
        let k = self.slot(page)?;
        Some(Page {
            slot: k as u32,
            vpn,
        })
    }
    fn is_referenced(&self, slot: u32) -> bool {
        self.is_resident(slot) && self.slot_bits(slot) & REFERENCED != 0
    }
    fn is_modified(&self, slot: u32) -> bool {
        self.is_resident(slot) && self.slot_bits(slot) & MODIFIED != 0
    }
    fn clear_referenced(&mut self, slot: u32) {
        if !self.is_referenced(slot) {
            return;
        }
        // The application's PTE is zapped (in a batch, before the lock is
        // released); the frame stays in the memfd and the next access is a
        // minor fault that sets the bit again.
        self.bits[slot as usize] &= !REFERENCED;
        self.zap_queue.push(self.page_in[slot as usize]);
    }
    fn request_frames(&mut self, count: usize) -> usize {
        // Without a pool or the daemon the budget is fixed at map time.
        let Some(source) = &self.source else {
            return 0;
        };
        // No more frames than the region has pages.
        let count = count.min(self.pages.saturating_sub(self.budget));
        let granted = source.request(count);
        self.grow_budget_to(self.budget + granted);
        granted
    }
    fn release_frames(&mut self, count: usize) -> usize {
        let Some(source) = &self.source else {
            return 0;
        };
        // Only free frames go back, and the region keeps one beside its pins.
        let n = count.min(self.room()).min(self.spare_budget());
        let released = source.release(n);
        self.budget -= released;
        released
    }
    fn flush(&mut self, slot: u32) -> bool {
        if !self.is_resident(slot) {
            return false;
        }
        if self.slot_bits(slot) & MODIFIED != 0 {
            self.flush_queue.push(self.page_in[slot as usize]);
        }
        true
    }
}
