//! HiPEC's reclamation in the simulator: the frame manager grows a
//! machine's frames, takes them back through the policy's `ReclaimFrame`
//! event (normal reclamation) or without asking it (forced).

use pagepilot_policy::{Memory, Page};

use super::{Driver, Machine};

impl Machine<'_> {
    /// The frame manager gave the policy `frames` more frames.
    pub fn grow(&mut self, frames: usize) {
        self.mem.capacity += frames;
    }

    /// HiPEC's normal reclamation: `frames` of the policy's frames are taken
    /// back (at most all but one). Only pages that no longer fit leave: the
    /// policy names them (its `ReclaimFrame` event, [`Policy::reclaim`]),
    /// its victim choice the rest. Returns the frames taken.
    pub fn shrink(&mut self, frames: usize) -> usize {
        let taken = frames.min(self.mem.capacity.saturating_sub(1));
        self.mem.capacity -= taken;
        let excess = self.mem.resident.saturating_sub(self.mem.capacity);
        if excess > 0 {
            self.evict_reclaimed(excess);
        }
        taken
    }

    /// HiPEC's forced reclamation: `frames` are taken back (at most all but
    /// one) without asking the policy; the pages that no longer fit are
    /// chosen by the engine's fallback. Returns the frames taken.
    pub fn force(&mut self, frames: usize) -> usize {
        let taken = frames.min(self.mem.capacity.saturating_sub(1));
        self.mem.capacity -= taken;
        while self.mem.resident > self.mem.capacity {
            let Some(v) = self.mem.fallback_victim(u32::MAX) else {
                break;
            };
            self.evict(v);
        }
        taken
    }

    /// Takes `count` frames back from the policy (a ReclaimFrame event).
    pub fn reclaim(&mut self, count: usize) {
        self.evict_reclaimed(count);
        self.mem.capacity = self.mem.capacity.saturating_sub(count).max(1);
    }

    /// Evicts `count` pages: those the policy names in its `ReclaimFrame`
    /// event, then its victims.
    fn evict_reclaimed(&mut self, count: usize) {
        let chosen = {
            let (mem, driver) = (&mut self.mem, &mut self.driver);
            match driver {
                Driver::Live(p) => p.reclaim(count, mem),
                Driver::Reference(p) => p.reclaim(count, mem),
            }
        };
        let mut taken = 0;
        for v in chosen.into_iter().take(count) {
            if self.mem.is_resident(v.slot) && v.vpn == self.mem.page_at(v.slot).vpn {
                self.evict(v);
                taken += 1;
            } else {
                self.counters.overruled += 1;
            }
        }
        let none = Page {
            slot: u32::MAX,
            vpn: u64::MAX,
        };
        while taken < count && self.mem.resident > 0 {
            let Some(v) = self.choose_victim(none) else {
                break;
            };
            self.evict(v);
            taken += 1;
        }
    }
}
