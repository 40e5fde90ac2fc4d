//! Regions: a file or anonymous memory mapped into the application and paged
//! by pagepilot under a frame budget and a policy of the application's choice.

use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::thread::JoinHandle;

use pagepilot_policy::Policy;

use crate::backing::Backing;
use crate::error::{FlushError, MapError, PrefaultError};
pub use crate::options::{FaultService, RegionOptions};
use crate::shared::Shared;
use crate::stats::RegionStats;
use crate::sys::{self, PAGE};
use crate::{fault, lifecycle, sigbus, threads};

/// A mapped region. Its memory is at [`Region::as_ptr`] for [`Region::len`]
/// bytes, usable from any thread with ordinary loads and stores. Dropping it
/// writes back every dirty page (errors are printed; use [`Region::unmap`] to
/// see them). It behaves like a `MAP_SHARED` mapping where programs rely on
/// it (docs/lifecycle.md): a region still mapped at a normal exit is written
/// back; after `fork` a writable file region is the kernel's mapping of the
/// file in parent and child alike, each seeing the other's stores at once,
/// and the parent pages it again once no child is left (an anonymous region
/// is private: absent in a child); an access beyond the file's current end,
/// or whose read fails, raises SIGBUS.
pub struct Region {
    pub(crate) shared: Arc<Shared>,
    handlers: Vec<JoinHandle<()>>,
    /// The only handler thread, reading the userfaultfd with blocking reads,
    /// and its doorbell page (see `fault::run_blocking`).
    blocking: Option<Box<(JoinHandle<bool>, usize)>>,
    policy_name: String,
    budget_frames: usize,
    /// Its budget fitted in the memory cgroup (not in a pool).
    fitted: Option<Box<crate::cgroup::Fitted>>,
    handler_threads: usize,
    in_thread: bool,
    closed: bool,
}

// Building a region: `Region::map`.
#[path = "mapping.rs"]
mod map;

impl Region {
    /// Maps a region. On error nothing is mapped.
    pub fn map(opts: RegionOptions) -> Result<Region, MapError> {
        Region::map_inner(opts, None)
    }

    /// Maps a region paged by `policy`, a policy object of the caller's
    /// (`opts.policy` is ignored). Its answers are checked like any policy's:
    /// a victim that is not a resident page is overruled.
    pub fn map_with_policy(
        opts: RegionOptions,
        policy: Box<dyn Policy>,
    ) -> Result<Region, MapError> {
        Region::map_inner(opts, Some(policy))
    }

    /// Maps a file, read-only or read-write.
    pub fn map_file(
        path: &Path,
        writable: bool,
        budget_bytes: usize,
        policy: &str,
    ) -> Result<Region, MapError> {
        Region::map(RegionOptions::new(
            Backing::File {
                path: path.into(),
                writable,
            },
            budget_bytes,
            policy,
        ))
    }

    /// Maps `len` bytes of zero-filled memory spilled to a swap file. The
    /// memory is private to this process: a child after `fork` does not
    /// have it (use a file region to share memory with forked workers).
    pub fn map_anon(len: usize, budget_bytes: usize, policy: &str) -> Result<Region, MapError> {
        Region::map(RegionOptions::new(
            Backing::Anonymous { len },
            budget_bytes,
            policy,
        ))
    }

    /// The region's first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.shared.views().app() as *mut u8
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.shared.views().len()
    }

    /// Whether the region is empty (never: mapping an empty region is refused).
    pub fn is_empty(&self) -> bool {
        self.shared.views().len() == 0
    }

    /// Maps `[offset, offset + len)` now by touching each page from this
    /// thread: an atomic load of one byte, or with `write` a
    /// `compare_exchange(0, 0)` on it (a locked write cycle on x86 whether it
    /// succeeds or not: changes nothing, marks the page modified). The kernel's own accesses to the
    /// range then find it mapped: with [`FaultService::FaultingThread`] a
    /// `read(2)` into an unmapped page (`write`) or a `write(2)` from one
    /// fails with EFAULT instead of faulting. A page evicted before the
    /// system call (other threads' faults over the budget) fails again:
    /// prefault and retry. A write prefault of a file region's page makes it
    /// dirty (written back on eviction). Pages already mapped (writable, for
    /// `write`) cost nothing.
    pub fn prefault(&self, offset: usize, len: usize, write: bool) -> Result<(), PrefaultError> {
        let region_len = self.len();
        if offset.checked_add(len).is_none_or(|end| end > region_len) {
            return Err(PrefaultError::OutOfRange {
                offset,
                len,
                region_len,
            });
        }
        let first = offset / PAGE * PAGE;
        for at in (first..offset + len).step_by(PAGE) {
            // SAFETY: `at` < offset + len <= the region's length, so inside
            // the application's view, which stays mapped while `self` lives.
            let p = unsafe { self.as_ptr().add(at) };
            // SAFETY: `p` is a byte of the application's view (above):
            // valid and aligned for an AtomicU8 (alignment 1) and mapped
            // while `self` lives; the reference is used in this iteration
            // only. Other threads may access the byte at the same time: this
            // access is atomic, so it forms no data race with their atomic
            // accesses nor with the kernel's (the pager's ioctls and its
            // other view), and the hardware performs it indivisibly whatever
            // they do (a plain read, even a volatile one, would race with
            // their writes). The pager makes no Rust reference to region
            // memory: it is reached through raw pointers (`as_ptr`).
            let byte = unsafe { std::sync::atomic::AtomicU8::from_ptr(p) };
            if write {
                // Not `fetch_or(0)`: the compiler turns an RMW that changes
                // nothing into a plain load (a read fault, mapped clean).
                let _ = byte.compare_exchange(0, 0, SeqCst, SeqCst);
            } else {
                // black_box: the value is unused, the access (the fault) is
                // what counts.
                std::hint::black_box(byte.load(std::sync::atomic::Ordering::Relaxed));
            }
        }
        Ok(())
    }

    /// Changes the frame budget (rounded down to pages, at least one). A
    /// smaller budget reclaims frames at once (HiPEC's ReclaimFrame: the
    /// policy's `reclaim` names the pages, `victim` the rest); dirty pages
    /// are written back first, and those whose write-back fails stay.
    /// In a pool or under the daemon the frames come from there: a larger
    /// budget is asked for (the pool grants what is free at once, the
    /// daemon answers later), a smaller one gives the frames back.
    pub fn set_budget(&mut self, budget_bytes: usize) -> Result<(), FlushError> {
        if self.shared.forked() {
            // A child's region is the kernel's mapping of the file.
            return Ok(());
        }
        let frames = (budget_bytes / PAGE).max(1);
        let old = {
            let mut g = self.shared.lock();
            let old = g.table.budget();
            if frames > old && g.table.source().is_some() {
                pagepilot_policy::Memory::request_frames(&mut g.table, frames - old);
                self.budget_frames = g.table.budget();
                return Ok(());
            }
            old
        };
        let failed = self.shared.set_budget(frames);
        let g = self.shared.lock();
        let now = g.table.budget();
        if let Some(source) = g.table.source().filter(|_| now < old) {
            source.release(old - now);
        }
        self.budget_frames = now;
        drop(g);
        if failed.is_empty() {
            Ok(())
        } else {
            Err(FlushError::WriteBack { pages: failed })
        }
    }

    /// Takes the application's advice on its accesses to come (`madvise`'s
    /// `MADV_RANDOM`, `MADV_SEQUENTIAL`, `MADV_NORMAL`), for the whole
    /// region.
    pub fn advise(&self, advice: crate::Advice) {
        if !self.shared.forked() {
            self.shared.lock().readahead.advise(advice);
        }
    }

    /// Writes back every dirty page (msync-like), then syncs the backing
    /// file. Pages whose write-back fails stay in memory and dirty.
    pub fn flush(&self) -> Result<(), FlushError> {
        if self.shared.forked() {
            return self.flush_child_view();
        }
        if let Some(flushed) = crate::sharing::flush_if_shared(&self.shared) {
            return flushed;
        }
        self.shared.flush(None)
    }

    /// Writes back every dirty page, then drops every clean page from
    /// memory (msync's `MS_INVALIDATE`): the next access reads the backing
    /// file again, and sees what other processes (a child after `fork`)
    /// wrote to it since this one read it. While the region is shared with
    /// a child it is the kernel's mapping of the file, which needs no
    /// invalidation (docs/lifecycle.md).
    pub fn invalidate(&self) -> Result<(), FlushError> {
        self.flush()?;
        if !self.shared.forked() && self.shared.sharing().mode() == crate::sharing::Mode::Paging {
            // Windows read ahead hold data as it was when they were read.
            fault::settle(&self.shared);
            self.shared.drop_clean();
        }
        Ok(())
    }

    /// In a child after `fork`: the region is the kernel's mapping of the
    /// file (`lifecycle`), written back by msync.
    fn flush_child_view(&self) -> Result<(), FlushError> {
        if !self.shared.child_view().load(SeqCst) {
            return Ok(());
        }
        sys::msync(self.shared.views().app(), self.shared.views().map_len())
            .map_err(FlushError::Sync)
    }

    /// A snapshot of the region's statistics.
    pub fn stats(&self) -> RegionStats {
        let mut s = self.shared.stats().snapshot();
        // A child after fork must not wait for a lock a parent's thread held.
        if !self.shared.forked() {
            let g = self.shared.lock();
            s.frames_in_use = g.table.frames_in_use() as u64;
            s.pinned_pages = g.table.pinned() as u64;
            s.unwritten_pages = g.table.unwritten() as u64;
            s.incidents = g.policy.incidents();
            s.budget_frames = g.table.budget() as u64;
            if let Some(h) = g.table.source().and_then(|m| m.holder_stats()) {
                s.pool_reclaimed_frames = h.reclaimed;
                s.forced_reclaim_frames = h.forced;
                s.forced_reclaims = h.forced_incidents;
            }
            s.bookkeeping_bytes =
                (g.table.bookkeeping_bytes() + self.shared.store().bookkeeping_bytes()) as u64;
            s.reader_threads = g.readers.as_ref().map_or(0, |r| r.started()) as u64;
        }
        if self.shared.forked() {
            s.budget_frames = self.budget_frames as u64;
        }
        s.pages = (self.shared.views().map_len() / PAGE) as u64;
        s.shared =
            self.shared.forked() || self.shared.sharing().mode() != crate::sharing::Mode::Paging;
        s.policy = self.policy_name.clone();
        s.budget_cut = self.fitted.as_ref().and_then(|f| f.cut);
        s.direct_io = self.shared.store().direct();
        s.uffd_access = self.shared.uffd_access();
        if let Some(limit) = &self.shared.fault_limit() {
            let t = limit.stats();
            s.postponed_faults = t.postponed;
            s.postponed_delay_us = t.delay_ns / 1000;
        }
        s.cached_bytes_read = self.shared.store().cached_bytes_read();
        s.handler_threads = self.handler_threads as u64;
        let t = &self.shared.tuning();
        s.readahead_max_pages = t.readahead_max as u64;
        s.readahead_depth = t.readahead_depth as u64;
        s.async_readahead = t.async_readahead;
        s
    }

    /// The statistics as JSON.
    pub fn stats_json(&self) -> String {
        serde_json::to_string(&self.stats()).unwrap_or_else(|_| "{}".into())
    }

    /// Bytes of memory the region's frames occupy now, as the kernel counts
    /// them (the memfd's allocated blocks): the budget check from outside.
    pub fn allocated_bytes(&self) -> u64 {
        self.shared.views().allocated_bytes()
    }

    /// Writes back every dirty page and unmaps the region. If a write-back
    /// fails the region is still unmapped and the error says which pages were
    /// lost; use [`Region::try_unmap`] to keep the region instead.
    pub fn unmap(self) -> Result<(), FlushError> {
        match self.try_unmap() {
            Ok(()) => Ok(()),
            Err((mut region, e)) => {
                region.close();
                Err(e)
            }
        }
    }

    /// Writes back every dirty page and unmaps the region; if a write-back
    /// fails, hands the region back (still mapped, data in memory) with the error.
    pub fn try_unmap(mut self) -> Result<(), (Region, FlushError)> {
        if let Err(e) = self.flush() {
            return Err((self, e));
        }
        self.close();
        Ok(())
    }

    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        if self.shared.forked() {
            // A child after fork: the threads and their state are the
            // parent's; only the child's own mapping of the file goes.
            if self.shared.child_view().swap(false, SeqCst) {
                // SAFETY: the file mapping `lifecycle` made in the region's
                // place in this child; the handle is being closed.
                unsafe { sys::unmap(self.shared.views().app(), self.shared.views().map_len()) };
            }
            self.shared.sharing().release_in_child();
            return;
        }
        lifecycle::forget(&self.shared);
        self.shared.sharing().close();
        // From here on an access faults as on unmapped memory (SIGSEGV),
        // whichever thread makes it and whatever fault it was waiting for:
        // not SIGBUS once the faulting-thread handler stops serving.
        let _ = sys::protect_none(self.shared.views().app(), self.shared.views().map_len());
        // Closing the channel stops the reader threads (joined below,
        // without the lock they take).
        let readers = self.shared.lock().readers.take();
        self.handlers.extend(
            readers
                .map(crate::readers::Readers::close)
                .unwrap_or_default(),
        );
        if self.in_thread {
            sigbus::unregister(&self.shared);
        }
        let _ = sys::eventfd_signal(std::os::fd::AsRawFd::as_raw_fd(self.shared.stop()));
        if let Some(b) = self.blocking.take() {
            let (h, bell) = *b;
            threads::stop_blocking(h, bell);
        }
        for h in self.handlers.drain(..) {
            let _ = h.join();
        }
        // Reads in flight write into the frames: wait for them.
        if let Some(r) = &self.shared.ring() {
            r.lock().unwrap_or_else(|p| p.into_inner()).drain();
        }
        // Dependency order: written back (by the caller), then the frames
        // return to their pool or the daemon, then the views go (when the
        // last reference drops).
        let source = self.shared.lock().table.take_source();
        drop(source);
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("addr", &self.as_ptr())
            .field("len", &self.len())
            .field("policy", &self.policy_name)
            .field("budget_frames", &self.budget_frames)
            .finish()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        if let Err(e) = self.flush() {
            eprintln!("pagepilot: region dropped with unwritten pages: {e}");
        }
        self.close();
    }
}
