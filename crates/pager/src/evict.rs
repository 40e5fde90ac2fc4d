//! Eviction and write-back, the engine's side of a fault: victims asked of
//! the policy (and overruled when they are not resident pages), reclaimed
//! frames (HiPEC's ReclaimFrame), dirty pages written back in contiguous
//! runs before their frames are punched out of the memfd, budget changes,
//! flushes, and the failures of all of these (a page whose write-back
//! fails stays in memory, dirty).

use crate::error::FailedPage;
use crate::region_state::RegionState;
use crate::shared::Shared;
use crate::stats::Counters;
use crate::sys::PAGE;

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Pages a policy asked to flush (HiPEC's Flush), and the pool of the
/// region, if any, whose reclaimer writes them back.
pub struct Flushes {
    /// The pages.
    pub pages: Vec<u32>,
    /// The region's pool and its holder there.
    pub pool: Option<(
        std::sync::Arc<crate::pool::PoolShared>,
        pagepilot_frames::HolderId,
    )>,
}

impl Shared {
    /// Writes back the pages a policy asked to flush. In a pool the pool's
    /// reclaimer writes them (HiPEC's I/O handling: the thread serving the
    /// fault does not wait for the disk); a region alone writes them here.
    /// A page whose write-back fails stays dirty in memory.
    pub fn flush_asked(&self, asked: Flushes) {
        match asked.pool {
            Some((pool, holder)) => pool.flush_later(holder, asked.pages),
            None => {
                let _ = self.flush(Some(&asked.pages));
            }
        }
    }

    /// Evicts `victims` ([`Shared::evict_io`], no lock held), then ends
    /// their eviction under the lock and wakes whoever waits for them.
    /// Returns the victims whose write-back failed (kept, `Pinned`).
    pub fn evict(&self, victims: &mut [(u32, bool)]) -> Vec<FailedPage> {
        let failed = self.evict_io(victims);
        let mut g = self.lock();
        self.finish_evictions(&mut g, victims, &failed);
        drop(g);
        self.notify();
        failed
    }

    /// Writes `pages` (ascending) back in contiguous runs: the pages written
    /// are added to `written`, those whose write failed to `failed`.
    ///
    /// # Safety
    /// Nobody may write the pages' frames during the call (they are
    /// write-protected or zapped) and the frames stay allocated.
    pub(crate) unsafe fn write_runs(
        &self,
        pages: &[u32],
        written: &mut Vec<u32>,
        failed: &mut Vec<FailedPage>,
    ) {
        for (first, n) in runs(pages.iter().copied()) {
            // SAFETY: the caller guarantees the frames are stable and allocated.
            let r = unsafe {
                self.store()
                    .write(first as usize, n, self.views().pager_addr(first))
            };
            match r {
                Ok(()) => {
                    Counters::add(&self.stats().writebacks, n as u64);
                    Counters::add(&self.stats().bytes_written, (n * PAGE) as u64);
                    written.extend(first..first + n as u32);
                }
                Err(e) => {
                    Counters::add(&self.stats().writeback_errors, n as u64);
                    failed.extend((first..first + n as u32).map(|page| FailedPage {
                        page,
                        errno: errno(&e),
                    }));
                }
            }
        }
    }

    /// Evicts victims taken by [`Shared::take_victim`] (no lock held): zaps
    /// the application's mapping, writes dirty pages back in contiguous runs,
    /// frees the frames. Returns the victims whose write-back failed; their
    /// frames are kept.
    pub fn evict_io(&self, victims: &mut [(u32, bool)]) -> Vec<FailedPage> {
        victims.sort_unstable();
        let mut failed = Vec::new();
        let dirty: Vec<u32> = victims.iter().filter(|v| v.1).map(|v| v.0).collect();
        // The application must not write a page while it is written back:
        // dirty victims are zapped first. Clean ones are not: the punch
        // below unmaps them from every view (one TLB shoot-down, not two),
        // and until then the application reads the data the store holds.
        for (first, n) in runs(dirty.iter().copied()) {
            self.views().zap(first, n);
        }
        // SAFETY: the pages are Evicting: no handler maps them and the
        // application's PTEs are zapped, so the frames are stable.
        unsafe { self.write_runs(&dirty, &mut Vec::new(), &mut failed) };
        let freed = victims
            .iter()
            .map(|v| v.0)
            .filter(|s| !failed.iter().any(|f| f.page == *s));
        for (first, n) in runs(freed) {
            self.views().punch(first, n);
        }
        failed
    }

    /// Evictions so far: the number of the region's latest eviction.
    pub(crate) fn evictions_so_far(&self) -> u64 {
        self.evict_seq().load(std::sync::atomic::Ordering::Acquire)
    }

    /// Gives page `page` the next number of the region's eviction sequence.
    pub(crate) fn stamp_eviction(&self, g: &mut RegionState, page: u32) {
        let seq = self
            .evict_seq()
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1;
        g.table.set_evicted_at(page, seq);
    }

    /// Ends the eviction of `victims` under the lock: freed pages become
    /// Absent (written back and punched: their dirty bits clear) and are
    /// reported ([`Shared::evicted`]); pages whose write-back failed are
    /// Unwritten and stay dirty.
    pub fn finish_evictions(
        &self,
        g: &mut RegionState,
        victims: &[(u32, bool)],
        failed: &[FailedPage],
    ) {
        for &(v, dirty) in victims {
            let written = !failed.iter().any(|f| f.page == v);
            let flags = g.table.finish_eviction(v, written);
            if written {
                self.evicted(g, v, flags, dirty);
            }
        }
    }

    /// Changes the budget to `frames` (at least one). Shrinking is HiPEC's
    /// ReclaimFrame: the policy names the pages to give up
    /// ([`Policy::reclaim`]; answers that are not resident pages are
    /// overruled), then [`Policy::victim`] is asked for the rest.
    pub fn set_budget(&self, frames: usize) -> Vec<FailedPage> {
        self.change_budget(|_| frames).1
    }

    /// Normal reclamation (HiPEC's ReclaimFrame): the pool asks `frames`
    /// back (at most all but one). Free frames go first; then the policy
    /// names pages ([`Policy::reclaim`], a program's ReclaimFrame event;
    /// a built-in's victim choice for what it does not name). A program
    /// that names too few gives back too few: the pool takes the rest by
    /// force at its deadline ([`Shared::take_back`]). Dirty pages are
    /// written back here, in the pool's reclaimer. Returns the frames given
    /// back (a page whose write-back fails is kept, its frame with it).
    pub fn give_back(&self, frames: usize) -> usize {
        let mut g = self.lock();
        // Pinned pages are never given back: the region keeps them and a frame.
        let frames = frames.min(g.table.spare_budget());
        let free = frames.min(g.table.room());
        let count = frames - free;
        let mut victims = if count > 0 {
            g.take_reclaimed(count, self.stats())
        } else {
            Vec::new()
        };
        while !self.tuning().reclaim_event_only && victims.len() < count {
            match g.take_victim(u32::MAX, self.evictions_so_far(), self.stats()) {
                Some(v) => victims.push(v),
                None => break,
            }
        }
        g.table.shrink_budget(free + victims.len());
        drop(g);
        self.settle_given(free, &mut victims)
    }

    /// Forced reclamation: the pool takes `frames` (at most all but one)
    /// that were not given back by the deadline: the budget shrinks by
    /// that many, and the engine's fallback names the pages to evict, not
    /// the policy (which is told they are gone). Dirty pages are written
    /// back first, here in the pool's reclaimer; one whose write-back fails
    /// is kept (the region is over its budget until a flush writes it).
    pub fn take_back(&self, frames: usize) {
        let mut g = self.lock();
        // Not even by force: the region keeps its pinned pages and a frame.
        g.table.shrink_budget(frames);
        let count = g.table.excess();
        let mut victims = Vec::new();
        while victims.len() < count {
            match g.table.fallback_victim(&[]) {
                Some(v) => victims.push(g.give_up(v)),
                None => break,
            }
        }
        drop(g);
        self.evict(&mut victims);
    }

    /// Evicts `victims` given back with `free` free frames; a victim whose
    /// write-back failed keeps its frame (the budget grows back by one).
    /// Returns the frames given back.
    fn settle_given(&self, free: usize, victims: &mut [(u32, bool)]) -> usize {
        let failed = self.evict(victims);
        if !failed.is_empty() {
            self.lock().table.grow_budget_by(failed.len());
        }
        free + victims.len() - failed.len()
    }

    /// A pool gave the region frames: its budget grows to `frames` (never
    /// shrinks here).
    pub fn grow_budget_to(&self, frames: usize) {
        self.lock().table.grow_budget_to(frames);
    }

    /// Sets the budget to `to(old)`, evicting what no longer fits. Returns
    /// the old budget and the pages whose write-back failed.
    fn change_budget(&self, to: impl FnOnce(usize) -> usize) -> (usize, Vec<FailedPage>) {
        let mut g = self.lock();
        // Never below the pinned pages and a frame to serve a fault in.
        // No more frames than pages.
        let frames = to(g.table.budget()).min(g.table.pages().max(1));
        let old = g.table.set_budget(frames);
        let count = g.table.excess();
        if g.table.budget() >= old || count == 0 {
            return (old, Vec::new());
        }
        let mut victims = g.take_reclaimed(count, self.stats());
        let none = u32::MAX;
        while victims.len() < count {
            match g.take_victim(none, self.evictions_so_far(), self.stats()) {
                Some(v) => victims.push(v),
                None => break,
            }
        }
        drop(g);
        (old, self.evict(&mut victims))
    }
}

/// Contiguous runs `(first, count)` of an ascending sequence of pages.
pub fn runs(pages: impl Iterator<Item = u32>) -> Vec<(u32, usize)> {
    let mut out: Vec<(u32, usize)> = Vec::new();
    for p in pages {
        match out.last_mut() {
            Some((f, n)) if *f + *n as u32 == p => *n += 1,
            _ => out.push((p, 1)),
        }
    }
    out
}
