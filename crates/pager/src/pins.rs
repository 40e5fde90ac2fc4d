//! Pinned pages: the Cache Kernel's locked mappings. A pinned page is
//! brought in, mapped, and held outside the policy (`State::Locked`) until
//! it is unpinned: no path chooses it as a victim (the policy does not
//! know it, the engine's fallback, forced reclamation and invalidation
//! take only resident pages), and a budget never shrinks below the pinned
//! pages and one frame to serve a fault in. Its frame counts in the
//! region's held frames; its writes are tracked and flushed as a resident
//! page's are.
//!
//! Pins do not nest (like `mlock`): pinning a pinned page changes nothing,
//! and one unpin unpins it.

use pagepilot_policy::FaultKind;

use crate::error::PinError;
use crate::fault::{self, Outcome};
use crate::frame_table::{State, MODIFIED, PENDING, REFERENCED};
use crate::region_state::RegionState;
use crate::shared::Shared;
use crate::sys::PAGE;
use crate::Region;

impl Shared {
    /// Pins pages `first..end`: every page not pinned yet is brought in
    /// (served as a read fault from this thread if it is not in memory)
    /// and taken from the policy. Refused, with nothing pinned, if the
    /// pins would leave no frame of the budget for faults, or if a page
    /// cannot be read.
    pub(crate) fn pin(&self, first: u32, end: u32) -> Result<(), PinError> {
        let _serial = self.pins().lock().unwrap_or_else(|p| p.into_inner());
        {
            let g = self.lock();
            let new = (first..end)
                .filter(|&p| g.table.state(p) != State::Locked)
                .count();
            let (pinned, budget_frames) = (g.table.pinned(), g.table.budget());
            if pinned + new > budget_frames.saturating_sub(1) {
                return Err(PinError::OverBudget {
                    new,
                    pinned,
                    budget_frames,
                });
            }
        }
        let mut pinned_now = Vec::new();
        for p in first..end {
            match self.pin_page(p) {
                Ok(true) => pinned_now.push(p),
                Ok(false) => {}
                Err(e) => {
                    let mut g = self.lock();
                    for &q in &pinned_now {
                        unlock_page(&mut g, q);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Pins page `p`, bringing it in first if it is not in memory. Returns
    /// whether it was pinned now (false: it was already).
    fn pin_page(&self, p: u32) -> Result<bool, PinError> {
        loop {
            let mut g = self.lock();
            match g.table.state(p) {
                State::Locked => return Ok(false),
                State::Resident | State::Unwritten => {
                    // The budget may have shrunk since the check (a pool
                    // reclaimed frames): still one frame left for faults.
                    let (pinned, budget_frames) = (g.table.pinned(), g.table.budget());
                    if pinned + 1 > budget_frames.saturating_sub(1) {
                        return Err(PinError::OverBudget {
                            new: 1,
                            pinned,
                            budget_frames,
                        });
                    }
                    self.lock_page(&mut g, p);
                    return Ok(true);
                }
                State::Absent | State::Loading | State::Evicting => {
                    drop(g);
                    // Shared with a child meanwhile: kept as a record, pinned
                    // when the region is paged again.
                    if crate::sharing::pin_if_shared(self, p, p + 1, true).is_some() {
                        return Ok(false);
                    }
                    // Served as the faulting thread would serve a read of
                    // it (waiting for a transition, reading it in); it may
                    // be evicted again before the lock is taken: retried.
                    let addr = self.views().app_addr(p);
                    if fault::serve(self, addr, 0, u64::MAX, false) == Outcome::Signal {
                        return Err(PinError::Unreadable { page: p as usize });
                    }
                }
            }
        }
    }

    /// Takes page `p` (Resident or Unwritten) from the policy and pins it,
    /// mapped: a pinned page takes no fault but its first write's.
    fn lock_page(&self, g: &mut RegionState, p: u32) {
        let told = g.table.state(p) == State::Resident && g.table.flags(p) & PENDING == 0;
        // Its MODIFIED and FLUSHING flags stay (so does its dirty bit).
        let f = g.table.pin(p);
        if told {
            // The policy forgets it as it forgets a victim: it is no longer
            // the policy's to choose. (A page read ahead and not entered
            // yet, PENDING, was never told to it.)
            let RegionState { table, policy, .. } = g;
            policy.forget_page(table, p);
        }
        if f & REFERENCED == 0 {
            // Not mapped (its referenced bit was cleared, or it is a
            // probe or a window's marker): map it, writable only if dirty.
            let wp = self.views().writable() && f & MODIFIED == 0;
            self.views().map(p, 1, wp);
        }
    }

    /// Unpins pages `first..end`, all pinned, or refuses (changing nothing)
    /// naming the first that is not.
    pub(crate) fn unpin(&self, first: u32, end: u32) -> Result<(), PinError> {
        let _serial = self.pins().lock().unwrap_or_else(|p| p.into_inner());
        let mut g = self.lock();
        if let Some(p) = (first..end).find(|&p| g.table.state(p) != State::Locked) {
            return Err(PinError::NotPinned { page: p as usize });
        }
        for p in first..end {
            unlock_page(&mut g, p);
        }
        Ok(())
    }
}

/// Gives pinned page `p` back to the policy, as a page brought in now.
fn unlock_page(g: &mut RegionState, p: u32) {
    g.table.unpin(p);
    g.tell_fault(p, FaultKind::Missing, false);
}

impl Region {
    /// The pages `[offset, offset + len)` touches, if the range lies in the region.
    fn pin_range(&self, offset: usize, len: usize) -> Result<(u32, u32), PinError> {
        let region_len = self.len();
        if offset.checked_add(len).is_none_or(|end| end > region_len) {
            return Err(PinError::OutOfRange {
                offset,
                len,
                region_len,
            });
        }
        let first = offset / PAGE;
        let end = if len == 0 {
            first
        } else {
            (offset + len).div_ceil(PAGE)
        };
        Ok((first as u32, end as u32))
    }

    /// Pins every page `[offset, offset + len)` touches (any byte range;
    /// whole pages are pinned): each is brought in now if it is not in
    /// memory, mapped, and never evicted until [`Region::unpin`]: not by
    /// the policy, the engine's fallback, a smaller budget, a pool's
    /// reclamation (normal or forced) nor [`Region::invalidate`] (a pinned
    /// clean page keeps the data it had). Its frame counts in the budget;
    /// dirty pinned pages are written back by [`Region::flush`] and at
    /// unmap, and stay pinned. Pins do not nest: pinning a pinned page
    /// changes nothing, one unpin unpins it. `RegionStats::pinned_pages`
    /// counts them.
    ///
    /// Refused, with nothing pinned: a range outside the region
    /// ([`PinError::OutOfRange`]); pins beyond the budget less one frame,
    /// which stays free to serve faults ([`PinError::OverBudget`]); a page
    /// beyond the file's current end or whose read fails
    /// ([`PinError::Unreadable`]). In a child after `fork` it does nothing
    /// (the region is the kernel's mapping of the file there); while the
    /// region is shared with a child the pin is recorded, and made when the
    /// pager pages the region again (docs/lifecycle.md).
    pub fn pin(&self, offset: usize, len: usize) -> Result<(), PinError> {
        let (first, end) = self.pin_range(offset, len)?;
        if self.shared.forked() {
            return Ok(());
        }
        // The daemon counts the pages against the user's pin quota first;
        // a pin refused here is handed back.
        let (at, bytes) = (first as usize * PAGE, (end - first) as usize * PAGE);
        let daemon = self.daemon_region();
        if let Some(d) = &daemon {
            d.pin(at, bytes).map_err(PinError::from_daemon)?;
        }
        if crate::sharing::pin_if_shared(&self.shared, first, end, true).is_some() {
            return Ok(());
        }
        let pinned = self.shared.pin(first, end);
        if let (Err(_), Some(d)) = (&pinned, &daemon) {
            let _ = d.unpin(at, bytes);
        }
        pinned
    }

    fn daemon_region(&self) -> Option<crate::daemon::DaemonRegion> {
        let g = self.shared.lock();
        g.table.source().and_then(|s| s.daemon())
    }

    /// Unpins every page `[offset, offset + len)` touches: they go back to
    /// the policy, as pages brought in now, and can be evicted again.
    /// Refused, with nothing unpinned, for a range outside the region or
    /// one holding a page that is not pinned ([`PinError::NotPinned`]).
    pub fn unpin(&self, offset: usize, len: usize) -> Result<(), PinError> {
        let (first, end) = self.pin_range(offset, len)?;
        if self.shared.forked() {
            return Ok(());
        }
        if crate::sharing::pin_if_shared(&self.shared, first, end, false).is_none() {
            self.shared.unpin(first, end)?;
        }
        if let Some(d) = self.daemon_region() {
            let (at, bytes) = (first as usize * PAGE, (end - first) as usize * PAGE);
            d.unpin(at, bytes).map_err(PinError::from_daemon)?;
        }
        Ok(())
    }
}
