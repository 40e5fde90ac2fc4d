//! Regions: a file or anonymous memory mapped into the application and paged
//! by pagepilot under a frame budget and a policy of the application's choice.

use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use pagepilot_policy::registry::{self, Setup};
use pagepilot_policy::Policy;

use crate::around::ReadAround;
use crate::backing::{Backing, Dataspace, FileDataspace, SwapDataspace};
use crate::engine::{FaultReads, Inner, Shared, Tuning};
use crate::error::{FlushError, MapError, PrefaultError};
use crate::guard::Guarded;
pub use crate::options::{FaultService, RegionOptions};
use crate::resident::Table;
use crate::stats::{Counters, RegionStats};
use crate::sys::{self, PAGE};
use crate::{auto, fault, lifecycle, sigbus, threads};

/// A mapped region. Its memory is at [`Region::as_ptr`] for [`Region::len`]
/// bytes, usable from any thread with ordinary loads and stores. Dropping it
/// writes back every dirty page (errors are printed; use [`Region::unmap`] to
/// see them). It behaves like a `MAP_SHARED` mapping where programs rely on
/// it (docs/lifecycle.md): a region still mapped at a normal exit is written
/// back; in a child after `fork` a file region is the kernel's mapping of
/// the file (an anonymous one is absent); an access beyond the file's
/// current end, or whose read fails, raises SIGBUS.
pub struct Region {
    pub(crate) shared: Arc<Shared>,
    handlers: Vec<JoinHandle<()>>,
    /// The only handler thread, reading the userfaultfd with blocking reads,
    /// and its doorbell page (see `fault::run_blocking`).
    blocking: Option<Box<(JoinHandle<bool>, usize)>>,
    policy_name: String,
    budget_frames: usize,
    handler_threads: usize,
    in_thread: bool,
    closed: bool,
}

const MAX_PAGES: usize = u32::MAX as usize - 1;
/// Most handler threads of `FaultService::HandlerPerCpu`: each fault wakes
/// every idle one, so more would cost more spurious wake-ups than the
/// CPU-local hand-off saves.
const MAX_PER_CPU: usize = 4;
/// Reader threads for missing faults that wait behind others in a batch
/// (`FaultReads::ReadersWhenQueued`): with the handler, four reads in flight.
const QUEUED_READERS: usize = 3;

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

    fn map_inner(opts: RegionOptions, given: Option<Box<dyn Policy>>) -> Result<Region, MapError> {
        opts.check()?;
        let (store, len, writable): (Box<dyn Dataspace>, usize, bool) = match &opts.backing {
            Backing::File { path, writable } => {
                let f = FileDataspace::open(path, *writable, opts.len)?;
                let len = opts.len.unwrap_or(f.len() as usize);
                check_len(len)?;
                (Box::new(f), len, *writable)
            }
            Backing::Anonymous { len } => {
                check_len(*len)?;
                let dir = opts.swap_dir.clone().unwrap_or_else(std::env::temp_dir);
                let s = SwapDataspace::create(&dir)?;
                (Box::new(s), *len, true)
            }
        };
        let pages = len.div_ceil(PAGE);
        let budget_frames = (opts.budget_bytes / PAGE).min(pages.max(1));
        let given_policy = given.is_some();
        let policy = match given {
            Some(p) => p,
            None => registry::build_live(
                &opts.policy,
                &Setup {
                    slots: budget_frames * (1 + crate::resident::HISTORY_PER_FRAME),
                    frames: budget_frames,
                    future: None,
                },
            )
            .map_err(|source| MapError::Policy {
                spec: opts.policy.clone(),
                source,
            })?,
        };
        let policy: Box<dyn Policy> = Box::new(Guarded::new(policy));
        let policy_name = policy.name();
        // What the options leave to the pager: the window from the policy,
        // the region's size and its budget.
        // A policy program, or an object of the caller's: it may keep its
        // own record of the pages it was told about (see `auto::window`).
        let program = given_policy || pagepilot_policy::program::is_program_spec(&opts.policy);
        let auto = auto::window(&policy_name, program, pages, budget_frames);
        let readahead_max = match opts.readahead_max_pages {
            0 => auto.pages,
            n => n,
        };
        let (readahead_depth, async_readahead) = match opts.readahead_depth {
            0 => (auto.depth.max(1), opts.async_readahead && auto.depth > 0),
            n => (n, opts.async_readahead),
        };
        let async_readahead = async_readahead && readahead_max > 1;
        // Several application threads faulting at once get their reads in
        // flight together; policy programs get no overlapping fills (they
        // would name pages not read yet, see `reader_threads`).
        let (fault_reads, fault_readers) = match (
            opts.fault_service == FaultService::FaultingThread,
            opts.reader_threads,
        ) {
            (true, _) => (FaultReads::Handler, 0),
            (false, 0) if program => (FaultReads::Handler, 0),
            (false, 0) => (FaultReads::ReadersWhenQueued, QUEUED_READERS),
            (false, n) => (FaultReads::Readers, n),
        };
        let device_readaround = store.readaround_pages();
        let map_len = pages * PAGE;
        let sys_err = |call| move |source| MapError::Sys { call, source };

        let memfd = sys::memfd("pagepilot-region", map_len).map_err(sys_err("memfd_create"))?;
        // A writable file region shares its dirty state with the daemon.
        let file = matches!(opts.backing, Backing::File { .. });
        let (dirty_memfd, dirty) = crate::dirty::DirtyMirror::for_region(writable && file, pages)
            .map_err(sys_err("dirty map"))?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&memfd);
        let app = sys::map_shared(fd, map_len, writable).map_err(sys_err("mmap"))?;
        let pager = match sys::map_shared(fd, map_len, true) {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: `app` was just mapped and is not yet shared.
                unsafe { sys::unmap(app, map_len) };
                return Err(MapError::Sys {
                    call: "mmap",
                    source: e,
                });
            }
        };
        let guard = Views {
            app,
            pager,
            map_len,
        };
        let in_thread = opts.fault_service == FaultService::FaultingThread;
        if in_thread && !cfg!(target_arch = "x86_64") {
            // The write bit of a fault is read from the x86-64 signal context.
            return Err(MapError::Unsupported("SIGBUS mode outside x86-64"));
        }
        let want = if in_thread { sys::FEATURE_SIGBUS } else { 0 }
            | sys::FEATURE_MINOR_SHMEM
            | sys::FEATURE_POISON
            | if writable { sys::FEATURE_WP_SHMEM } else { 0 };
        let (uffd, got, uffd_access) = sys::Uffd::open(want)?;
        if in_thread && got & sys::FEATURE_SIGBUS == 0 {
            return Err(MapError::Unsupported("SIGBUS mode"));
        }
        if got & sys::FEATURE_MINOR_SHMEM == 0 {
            return Err(MapError::Unsupported("minor faults on shmem"));
        }
        if writable && got & sys::FEATURE_WP_SHMEM == 0 {
            return Err(MapError::Unsupported("write-protect on shmem"));
        }
        let mode = sys::MODE_MISSING | sys::MODE_MINOR | if writable { sys::MODE_WP } else { 0 };
        let ioctls = uffd
            .register(app, map_len, mode)
            .map_err(sys_err("UFFDIO_REGISTER"))?;
        if ioctls & (1 << 7) == 0 {
            return Err(MapError::Unsupported("UFFDIO_CONTINUE"));
        }
        let stop = sys::eventfd().map_err(sys_err("eventfd"))?;
        // Prefetched windows are read on a ring where the kernel has one;
        // reader threads otherwise (and when asked for: `io_uring: false`).
        let ring = (opts.io_uring && async_readahead && opts.reader_threads == 0)
            .then(crate::ring::Ring::new)
            .and_then(Result::ok)
            .map(Mutex::new);
        std::mem::forget(guard);
        // In a pool the region is guaranteed its minimum and asks for the
        // rest of its budget.
        let membership = match &opts.pool {
            Some(pool) => {
                let min = match opts.min_frames {
                    0 => budget_frames,
                    n => n.min(budget_frames),
                };
                Some(pool.shared().membership(min, budget_frames)?)
            }
            None => None,
        };
        // Outside a pool, the daemon's, if the process joined one: the
        // budget is what it grants (set as the region registers).
        let daemon = match opts.pool {
            Some(_) => None,
            None => opts.daemon.client()?,
        };
        let capacity = match (&membership, &daemon) {
            (Some(m), _) => m.held.max(1),
            (None, Some(_)) => 1,
            (None, None) => budget_frames,
        };
        let fault_limit = match opts.fault_limit {
            Some((faults, period)) => {
                let control = opts
                    .pool
                    .as_ref()
                    .map_or_else(crate::limit::controller, |p| p.shared().rate.clone());
                let limit = crate::limit::FaultLimit::admit(control, opts.reserve, faults, period);
                Some(limit?)
            }
            None => None,
        };
        let pool_link = membership.as_ref().map(|m| (m.pool().clone(), m.holder));
        let mut table = Table::new(pages, capacity, app);
        table.source = membership.map(crate::source::Source::Pool);
        table.dirty = dirty;
        let shared = Arc::new(Shared {
            fault_limit,
            uffd,
            memfd,
            dirty_memfd,
            pins: Mutex::new(()),
            app,
            pager,
            map_len,
            len,
            writable,
            store,
            inner: Mutex::new(Inner {
                table,
                policy,
                time: 0,
                next_expected: u32::MAX,
                window: 1,
                recent_faults: [u32::MAX; crate::engine::RECENT_FAULTS],
                around: ReadAround::for_region(
                    budget_frames,
                    readahead_max,
                    device_readaround,
                    auto::mru_like(&policy_name),
                ),
                confirmed: false,
                streams: [(u32::MAX, 1, false); crate::engine::STREAMS],
                pending: Default::default(),
                inflight: Default::default(),
                queued: Vec::new(),
                readers: None,
                prefetch_issued: 0,
                prefetch_done: 0,
                evictions: None,
            }),
            cv: Condvar::new(),
            stats: Counters::default(),
            tuning: Tuning {
                fault_around: opts.fault_around_pages,
                readahead_max: readahead_max.max(1),
                zero_around_max: opts.zero_around_max_pages.max(1),
                spin_us: opts.handler_spin_us.min(1_000_000),
                async_readahead,
                readahead_depth: readahead_depth.clamp(1, crate::options::MAX_PREFETCHERS),
                fault_reads,
                reclaim_event_only: program && !given_policy,
            },
            ring,
            poison: got & sys::FEATURE_POISON != 0,
            uffd_access,
            stop,
            evict_seq: std::sync::atomic::AtomicU64::new(0),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            owner: std::process::id(),
            child_view: std::sync::atomic::AtomicBool::new(false),
        });
        if let Some((pool, holder)) = pool_link {
            pool.attach(holder, &shared);
        }
        if let Some(client) = &daemon {
            let terms = crate::daemon::Terms {
                min_frames: match opts.min_frames {
                    0 => budget_frames,
                    n => n.min(budget_frames),
                },
                budget_frames,
                fault_limit: opts.fault_limit,
                reserve: opts.reserve,
            };
            crate::daemon::join(client, &shared, &terms)?;
        }
        lifecycle::adopt(&shared)?;
        let mut region = Region {
            shared: shared.clone(),
            handlers: Vec::new(),
            blocking: None,
            policy_name,
            budget_frames,
            handler_threads: if in_thread { 0 } else { opts.handler_threads },
            in_thread,
            closed: false,
        };
        let readers = threads::spawn_readers(&shared, fault_readers)?;
        region.handlers.extend(readers);
        if in_thread {
            sigbus::register(shared)?;
            return Ok(region);
        }
        // A policy program, or a caller's policy object, keeps its own record
        // of the pages it was told about: fills overlapping on several
        // handlers leave it naming victims not read yet (`reader_threads`),
        // so it gets one handler, the service it had before per-CPU handlers.
        let per_cpu = opts.fault_service == FaultService::HandlerPerCpu && !program;
        let lone = match opts.fault_service {
            FaultService::HandlerThreads => opts.handler_threads == 1,
            _ => !per_cpu,
        };
        if lone && opts.handler_spin_us == 0 {
            if let Some(b) = threads::spawn_blocking(&shared) {
                region.blocking = Some(Box::new(b));
                return Ok(region);
            }
        }

        let handlers = if per_cpu {
            let cpus = sys::allowed_cpus(MAX_PER_CPU).map_err(sys_err("sched_getaffinity"))?;
            threads::spawn_handlers(&shared, cpus.into_iter().map(Some).collect())?
        } else {
            threads::spawn_handlers(&shared, vec![None; opts.handler_threads])?
        };
        region.handler_threads = handlers.len();
        region.handlers.extend(handlers);
        Ok(region)
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

    /// Maps `len` bytes of zero-filled memory spilled to a swap file.
    pub fn map_anon(len: usize, budget_bytes: usize, policy: &str) -> Result<Region, MapError> {
        Region::map(RegionOptions::new(
            Backing::Anonymous { len },
            budget_bytes,
            policy,
        ))
    }

    /// The region's first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.shared.app as *mut u8
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.shared.len
    }

    /// Whether the region is empty (never: mapping an empty region is refused).
    pub fn is_empty(&self) -> bool {
        self.shared.len == 0
    }

    /// Maps `[offset, offset + len)` now by touching each page from this
    /// thread: a read, or with `write` a `compare_exchange(0, 0)` on one
    /// byte (a locked write cycle on x86 whether it succeeds or not: changes
    /// nothing, marks the page modified). The kernel's own accesses to the
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
            if write {
                // SAFETY: `p` is a valid, aligned byte of mapped memory;
                // atomic access makes a concurrent application write safe.
                let byte = unsafe { std::sync::atomic::AtomicU8::from_ptr(p) };
                // Not `fetch_or(0)`: the compiler turns an RMW that changes
                // nothing into a plain load (a read fault, mapped clean).
                let _ = byte.compare_exchange(0, 0, SeqCst, SeqCst);
            } else {
                // SAFETY: as above; a volatile read of one byte.
                unsafe { std::ptr::read_volatile(p) };
            }
        }
        Ok(())
    }

    /// Changes the frame budget (rounded down to pages, at least one). A
    /// smaller budget reclaims frames at once (HiPEC's ReclaimFrame: the
    /// policy's `reclaim` names the pages, `victim` the rest); dirty pages
    /// are written back first, and those whose write-back fails stay.
    pub fn set_budget(&mut self, budget_bytes: usize) -> Result<(), FlushError> {
        if self.shared.forked() {
            // A child's region is the kernel's mapping of the file.
            return Ok(());
        }
        let frames = (budget_bytes / PAGE).max(1);
        let failed = self.shared.set_budget(frames);
        self.budget_frames = self.shared.lock().table.capacity;
        if failed.is_empty() {
            Ok(())
        } else {
            Err(FlushError::WriteBack { pages: failed })
        }
    }

    /// Writes back every dirty page (msync-like), then syncs the backing
    /// file. Pages whose write-back fails stay in memory and dirty.
    pub fn flush(&self) -> Result<(), FlushError> {
        if self.shared.forked() {
            return self.flush_child_view();
        }
        self.shared.flush(None)
    }

    /// Writes back every dirty page, then drops every clean page from
    /// memory (msync's `MS_INVALIDATE`): the next access reads the backing
    /// file again, and sees what other processes (a child after `fork`)
    /// wrote to it since this one read it.
    pub fn invalidate(&self) -> Result<(), FlushError> {
        self.flush()?;
        if !self.shared.forked() {
            // Windows read ahead hold data as it was when they were read.
            fault::settle(&self.shared);
            self.shared.drop_clean();
        }
        Ok(())
    }

    /// In a child after `fork`: the region is the kernel's mapping of the
    /// file (`lifecycle`), written back by msync.
    fn flush_child_view(&self) -> Result<(), FlushError> {
        if !self.shared.child_view.load(SeqCst) {
            return Ok(());
        }
        sys::msync(self.shared.app, self.shared.map_len).map_err(FlushError::Sync)
    }

    /// A snapshot of the region's statistics.
    pub fn stats(&self) -> RegionStats {
        let mut s = self.shared.stats.snapshot();
        // A child after fork must not wait for a lock a parent's thread held.
        if !self.shared.forked() {
            let g = self.shared.lock();
            s.frames_in_use = (g.table.held - g.table.evicting) as u64;
            s.pinned_pages = g.table.locked as u64;
            s.unwritten_pages = g.table.unwritten as u64;
            s.incidents = g.policy.incidents();
            s.budget_frames = g.table.capacity as u64;
            if let Some(h) = g.table.source.as_ref().and_then(|m| m.holder_stats()) {
                s.pool_reclaimed_frames = h.reclaimed;
                s.forced_reclaim_frames = h.forced;
                s.forced_reclaims = h.forced_incidents;
            }
            s.bookkeeping_bytes =
                (g.table.bookkeeping_bytes() + self.shared.store.bookkeeping_bytes()) as u64;
        }
        if self.shared.forked() {
            s.budget_frames = self.budget_frames as u64;
        }
        s.pages = (self.shared.map_len / PAGE) as u64;
        s.policy = self.policy_name.clone();
        s.direct_io = self.shared.store.direct();
        s.uffd_access = self.shared.uffd_access;
        if let Some(limit) = &self.shared.fault_limit {
            let t = limit.stats();
            s.postponed_faults = t.postponed;
            s.postponed_delay_us = t.delay_ns / 1000;
        }
        s.cached_bytes_read = self.shared.store.cached_bytes_read();
        s.handler_threads = self.handler_threads as u64;
        let t = &self.shared.tuning;
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
        sys::allocated_bytes(std::os::fd::AsRawFd::as_raw_fd(&self.shared.memfd)).unwrap_or(0)
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
            if self.shared.child_view.swap(false, SeqCst) {
                // SAFETY: the file mapping `lifecycle` made in the region's
                // place in this child; the handle is being closed.
                unsafe { sys::unmap(self.shared.app, self.shared.map_len) };
            }
            return;
        }
        lifecycle::forget(&self.shared);
        // From here on an access faults as on unmapped memory (SIGSEGV),
        // whichever thread makes it and whatever fault it was waiting for:
        // not SIGBUS once the faulting-thread handler stops serving.
        let _ = sys::protect_none(self.shared.app, self.shared.map_len);
        // Closing the channel stops the reader threads.
        self.shared.lock().readers = None;
        if self.in_thread {
            sigbus::unregister(&self.shared);
        }
        let _ = sys::eventfd_signal(std::os::fd::AsRawFd::as_raw_fd(&self.shared.stop));
        if let Some(b) = self.blocking.take() {
            let (h, bell) = *b;
            threads::stop_blocking(h, bell);
        }
        for h in self.handlers.drain(..) {
            let _ = h.join();
        }
        // Reads in flight write into the frames: wait for them.
        if let Some(r) = &self.shared.ring {
            r.lock().unwrap_or_else(|p| p.into_inner()).drain();
        }
        // Dependency order: written back (by the caller), then the frames
        // return to their pool or the daemon, then the views go (when the
        // last reference drops).
        let source = self.shared.lock().table.source.take();
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

fn check_len(len: usize) -> Result<(), MapError> {
    if len == 0 || len.div_ceil(PAGE) > MAX_PAGES {
        return Err(MapError::BadLength(len));
    }
    Ok(())
}

/// Unmaps both views if mapping fails half way.
struct Views {
    app: usize,
    pager: usize,
    map_len: usize,
}

impl Drop for Views {
    fn drop(&mut self) {
        // SAFETY: both views were mapped by `Region::map` and were never handed out.
        unsafe {
            sys::unmap(self.app, self.map_len);
            sys::unmap(self.pager, self.map_len);
        }
    }
}
