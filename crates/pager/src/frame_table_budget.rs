//! The frame table's budget: the frames the region may hold, how it grows
//! and shrinks (never below the pinned pages and one frame), and the
//! counts of frames by state that room and excess follow from.

use super::FrameTable;

impl FrameTable {
    /// The budget in frames.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Grows the budget to `frames` (never shrinks it here); waiters are
    /// woken if it grew. Returns whether it did.
    pub fn grow_budget_to(&mut self, frames: usize) -> bool {
        if frames <= self.budget {
            return false;
        }
        self.budget = frames;
        self.wake = true;
        true
    }

    /// Grows the budget by `frames` (frames kept back, or granted).
    pub fn grow_budget_by(&mut self, frames: usize) {
        self.grow_budget_to(self.budget + frames);
    }

    /// Sets the budget to `frames`, never below [`FrameTable::min_budget`].
    /// Returns the budget before.
    pub fn set_budget(&mut self, frames: usize) -> usize {
        let old = self.budget;
        self.budget = frames.max(self.min_budget());
        if self.budget > old {
            self.wake = true;
        }
        old
    }

    /// Takes up to `frames` from the budget, never below
    /// [`FrameTable::min_budget`]. Returns how many it took.
    pub fn shrink_budget(&mut self, frames: usize) -> usize {
        let taken = frames.min(self.spare_budget());
        self.budget -= taken;
        taken
    }

    /// Frames the budget could give up: all but the pinned pages and one.
    pub fn spare_budget(&self) -> usize {
        self.budget.saturating_sub(self.min_budget())
    }

    /// Frames the policy's pages may hold: the budget less the pinned pages.
    pub fn usable(&self) -> usize {
        self.budget.saturating_sub(self.locked)
    }

    /// The smallest budget the region may shrink to: its pinned pages and
    /// one frame to serve a fault in.
    pub fn min_budget(&self) -> usize {
        self.locked + 1
    }

    /// Frames holding data (every state but Absent).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Frames in use: held, less those being evicted.
    pub fn frames_in_use(&self) -> usize {
        self.held - self.evicting
    }

    /// Pages pinned by the application.
    pub fn pinned(&self) -> usize {
        self.locked
    }

    /// Pages whose write-back failed, held until a flush writes them.
    pub fn unwritten(&self) -> usize {
        self.unwritten
    }

    /// Frames that must be freed to stay within the budget (frames being
    /// evicted already count as free).
    pub fn excess(&self) -> usize {
        (self.held - self.evicting).saturating_sub(self.budget)
    }

    /// Pages that fit in the budget without an eviction.
    pub fn room(&self) -> usize {
        self.budget.saturating_sub(self.held - self.evicting)
    }
}
