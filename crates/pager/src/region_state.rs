//! What a region's lock guards: the frame table, the policy port, the
//! read-ahead planner and the prefetched windows, with the few steps that
//! take two of them at once. Pure state: it makes no system call.

use pagepilot_policy::FaultKind;

use crate::frame_table::FrameTable;
use crate::policy_port::PolicyPort;

/// Pages brought in by the last missing faults that a page evicted as
/// recently may not evict in turn (`Shared::guard_refault`): more than the
/// pages one instruction or a `memcpy`'s interleaved loads touch at once.
pub const RECENT_FAULTS: usize = 8;

/// What the lock guards.
pub struct RegionState {
    /// The frame table (the policy's [`pagepilot_policy::Memory`]).
    pub table: FrameTable,
    /// The region's policy.
    pub policy: PolicyPort,
    /// The read-ahead planner: the sequences of faults followed, their
    /// windows, read-around sized by use.
    pub readahead: crate::readahead::ReadAhead,
    /// The faulting pages of the last missing faults, most recent first
    /// (`RECENT_FAULTS`; `u32::MAX`: none).
    pub recent_faults: [u32; RECENT_FAULTS],
    /// The prefetched windows: in flight, then pending until entered.
    pub prefetch: crate::prefetch::Prefetches,
    /// The region's reader threads, if it has any.
    pub readers: Option<crate::readers::Readers>,
    /// Eviction notifications, if a subscriber turned them on (`evictions`).
    pub evictions: Option<crate::evictions::EvictionQueue>,
}

impl RegionState {
    /// Tells the policy of a fault on page `s`.
    pub fn tell_fault(&mut self, s: u32, kind: FaultKind, write: bool) {
        self.policy.fault(&mut self.table, s, kind, write);
    }

    /// Takes resident page `s` from the policy to be evicted: it becomes
    /// `Evicting` and the policy forgets it. Returns the victim and whether
    /// it must be written back.
    pub fn give_up(&mut self, s: u32) -> (u32, bool) {
        let dirty = self.table.begin_eviction(s);
        self.policy.forget_page(&mut self.table, s);
        (s, dirty)
    }
}
