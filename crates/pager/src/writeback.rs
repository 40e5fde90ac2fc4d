//! Write-back outside eviction: flushes (msync-like, and the pages a
//! policy asks to flush) and invalidation (msync's MS_INVALIDATE). A flush
//! write-protects each dirty page and writes it without the lock, so a
//! racing write faults and dirties the page again.

use crate::error::FlushError;
use crate::evict::runs;
use crate::frame_table::{State, FLUSHING, MODIFIED, PENDING};
use crate::shared::Shared;

impl Shared {
    /// [`Shared::write_back`], then syncs the backing store.
    pub fn flush(&self, only: Option<&[u32]>) -> Result<(), FlushError> {
        self.write_back(only)?;
        self.store().sync().map_err(FlushError::Sync)
    }

    /// Drops every clean resident page (msync's MS_INVALIDATE): the next
    /// access reads the backing store again, and sees what other processes
    /// wrote to it. Dirty pages, pinned pages and pages in a transition are
    /// left alone.
    pub fn drop_clean(&self) {
        let mut g = self.lock();
        let mut victims = Vec::new();
        for s in g.table.held_pages() {
            let f = g.table.flags(s);
            if g.table.state(s) != State::Resident || f & (MODIFIED | FLUSHING | PENDING) != 0 {
                continue;
            }
            victims.push(g.give_up(s));
        }
        drop(g);
        self.evict(&mut victims);
    }

    /// Writes back every dirty page (resident, pinned by the application, or
    /// unwritten after a failed write-back). Unwritten pages that are
    /// written are freed (an eviction); the others stay, clean. Reports the
    /// pages that could not be written; they stay in memory and dirty.
    ///
    /// The dirty map: a resident page's MODIFIED flag becomes FLUSHING
    /// while it is written (its bit stays set), and the bit clears only
    /// when the write ended with neither flag set (a write during the I/O
    /// faults and sets MODIFIED again first).
    pub fn write_back(&self, only: Option<&[u32]>) -> Result<(), FlushError> {
        if !self.store().persistent() {
            return Ok(());
        }
        let mut resident = Vec::new();
        // Unwritten pages (their eviction's write-back failed).
        let mut pinned = Vec::new();
        {
            let mut g = self.lock();
            let pick: Vec<u32> = match only {
                Some(list) => list.to_vec(),
                None => g.table.held_pages(),
            };
            for s in pick {
                let f = g.table.flags(s);
                match g.table.state(s) {
                    State::Resident | State::Locked if f & MODIFIED != 0 => {
                        // Write-protect first: a write during the I/O faults
                        // and sets MODIFIED again.
                        self.views().protect(s);
                        g.table.set_flags(s, (f & !MODIFIED) | FLUSHING);
                        resident.push(s);
                    }
                    State::Unwritten => {
                        g.table.begin_rewrite(s);
                        pinned.push(s);
                    }
                    _ => {}
                }
            }
        }
        for (first, n) in runs(pinned.iter().copied()) {
            self.views().zap(first, n);
        }
        let mut failed = Vec::new();
        let mut written_pinned = Vec::new();
        // SAFETY: resident pages are write-protected (a racing write faults
        // and re-dirties the page); pinned ones are Evicting and zapped. The
        // frames stay allocated during the write.
        unsafe {
            self.write_runs(&resident, &mut Vec::new(), &mut failed);
            self.write_runs(&pinned, &mut written_pinned, &mut failed);
        }
        for (first, n) in runs(written_pinned.iter().copied()) {
            self.views().punch(first, n);
        }
        {
            let mut g = self.lock();
            for &s in &resident {
                let f = g.table.flags(s) & !FLUSHING;
                let f = if failed.iter().any(|x| x.page == s) {
                    f | MODIFIED
                } else {
                    f
                };
                if g.table.state(s) != State::Absent {
                    g.table.set_flags(s, f);
                }
            }
            for &s in &pinned {
                let written = written_pinned.contains(&s);
                let f = g.table.finish_eviction(s, written);
                if written {
                    self.evicted(&mut g, s, f, true);
                }
            }
        }
        self.notify();
        if !failed.is_empty() {
            failed.sort_by_key(|f| f.page);
            return Err(FlushError::WriteBack { pages: failed });
        }
        Ok(())
    }
}
