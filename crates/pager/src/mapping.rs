//! Mapping a region: the backing store and the policy opened, both views of
//! the memfd mapped and registered with userfaultfd, the budget drawn from
//! a pool or the daemon, the dirty map made, the fault service started.

use std::sync::{Arc, Mutex};

use pagepilot_policy::registry::{self, Setup};
use pagepilot_policy::Policy;

use super::Region;
use crate::around::ReadAround;
use crate::backing::Backing;
use crate::error::MapError;
use crate::frame_table::FrameTable;
use crate::guard::Guarded;
use crate::lock::RegionLock;
use crate::options::{FaultService, RegionOptions};
use crate::policy_port::PolicyPort;
use crate::readahead::ReadAhead;
use crate::region_state::RegionState;
use crate::shared::{Shared, SharedParts};
use crate::stats::Counters;
use crate::sys::{self, PAGE};
use crate::tuning::{FaultReads, Tuning};
use crate::views::Views;
use crate::{auto, lifecycle, sigbus, threads};

const MAX_PAGES: usize = u32::MAX as usize - 1;
/// Most handler threads of `FaultService::HandlerPerCpu`: each fault wakes
/// every idle one, so more would cost more spurious wake-ups than the
/// CPU-local hand-off saves.
const MAX_PER_CPU: usize = 4;
/// Reader threads for missing faults that wait behind others in a batch
/// (`FaultReads::ReadersWhenQueued`): with the handler, four reads in flight.
const QUEUED_READERS: usize = 3;

impl Region {
    pub(super) fn map_inner(
        opts: RegionOptions,
        given: Option<Box<dyn Policy>>,
    ) -> Result<Region, MapError> {
        opts.check()?;
        if let Backing::Anonymous { len } = &opts.backing {
            check_len(*len)?;
        }
        let want = opts.len.filter(|_| !opts.past_end);
        let opened = opts.backing.open(want, opts.swap_dir.as_deref())?;
        let pinned = opened.pinned.clone();
        let region = Region::start(opts, given, opened)?;
        // A pinned dataspace's pages stay resident while it is attached.
        for r in pinned {
            region
                .pin(r.start * PAGE, (r.end - r.start) * PAGE)
                .map_err(MapError::Pin)?;
        }
        Ok(region)
    }

    /// Maps the region over its opened backing and starts its fault service.
    fn start(
        opts: RegionOptions,
        given: Option<Box<dyn Policy>>,
        opened: crate::backing::Opening,
    ) -> Result<Region, MapError> {
        let spare = usize::from(!opened.pinned.is_empty());
        let (store, writable, attached) = (opened.store, opened.writable, opened.map);
        let len = match &opts.backing {
            Backing::File { .. } => opts.len.unwrap_or(store.size() as usize),
            Backing::Anonymous { len } => *len,
            Backing::Dataspaces(_) => store.size() as usize,
        };
        check_len(len)?;
        let pages = len.div_ceil(PAGE);
        // Pins leave one frame of the budget for faults: a region whose
        // pages are all a pinned dataspace's may have one frame more than
        // pages, or it could never be mapped.
        let budget_frames = (opts.budget_bytes / PAGE).min(pages.max(1) + spare);
        // A region alone takes what its memory cgroup leaves; a pool's
        // regions share what the pool was given.
        let (budget_frames, fitted) = match opts.pool {
            Some(_) => (budget_frames, None),
            None => {
                let (frames, fitted) = crate::cgroup::fit(budget_frames);
                (frames, Some(fitted))
            }
        };
        let given_policy = given.is_some();
        let policy = match given {
            Some(p) => p,
            None => registry::build_live(
                &opts.policy,
                &Setup {
                    slots: budget_frames * (1 + crate::frame_table::HISTORY_PER_FRAME),
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
        let file_path = match &opts.backing {
            // Absolute: a handle is opened by another process, maybe elsewhere.
            Backing::File { path, .. } => Some(std::fs::canonicalize(path).unwrap_or(path.clone())),
            _ => None,
        };
        let (dirty_memfd, dirty) = crate::dirty::DirtyMirror::for_region(writable && file, pages)
            .map_err(sys_err("dirty map"))?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&memfd);
        let reserved = opts.app_address.filter(|_| opts.app_address_reserved);
        let app = match reserved {
            // SAFETY: the caller reserved the range for the view.
            Some(at) => unsafe { sys::map_shared_over(at, fd, map_len, writable) },
            None => sys::map_shared_near(opts.app_address, fd, map_len, writable),
        }
        .map_err(sys_err("mmap"))?;
        let mut guard = UnmapOnError {
            app,
            pager: None,
            map_len,
            reserved: reserved.is_some(),
        };
        let pager = sys::map_shared(fd, map_len, true).map_err(sys_err("mmap"))?;
        guard.pager = Some(pager);
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
        let mut table = FrameTable::new(pages, capacity);
        table.set_source(membership.map(crate::source::Source::Pool));
        table.set_dirty_map(dirty);
        let shared = Arc::new(Shared::new(SharedParts {
            fault_limit,
            views: Views::new(
                uffd,
                memfd,
                (app, pager),
                (map_len, len),
                writable,
                got & sys::FEATURE_POISON != 0,
            ),
            dirty_memfd,
            pins: Mutex::new(()),
            store,
            attached,
            frames: RegionLock::new(
                RegionState {
                    table,
                    policy: PolicyPort::new(policy),
                    recent_faults: [u32::MAX; crate::region_state::RECENT_FAULTS],
                    readahead: ReadAhead::new(ReadAround::for_region(
                        budget_frames,
                        readahead_max,
                        device_readaround,
                        auto::mru_like(&policy_name),
                    )),
                    prefetch: Default::default(),
                    readers: None,
                    evictions: None,
                },
                app,
            ),
            stats: Counters::default(),
            tuning: Tuning {
                fault_around: opts.fault_around_pages,
                readahead_max: readahead_max.max(1),
                zero_around_max: opts.zero_around_max_pages.max(1),
                spin_us: opts.handler_spin_us.min(1_000_000),
                async_readahead,
                readahead_depth: readahead_depth.clamp(1, crate::options::MAX_PREFETCHERS),
                fault_reads,
                copy_windows: opts.fault_service != FaultService::FaultingThread,
                reclaim_event_only: program && !given_policy,
            },
            ring,
            uffd_access,
            stop,
            evict_seq: std::sync::atomic::AtomicU64::new(0),
            owner: std::process::id(),
            child_view: std::sync::atomic::AtomicBool::new(false),
            sharing: crate::sharing::Sharing::new(mode, file_path),
        }));
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
            fitted,
            handler_threads: if in_thread { 0 } else { opts.handler_threads },
            in_thread,
            closed: false,
        };
        threads::give_readers(&shared, fault_readers, in_thread)?;
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
}

fn check_len(len: usize) -> Result<(), MapError> {
    if len == 0 || len.div_ceil(PAGE) > MAX_PAGES {
        return Err(MapError::BadLength(len));
    }
    Ok(())
}

/// Unmaps both views if mapping fails half way.
struct UnmapOnError {
    app: usize,
    pager: Option<usize>,
    map_len: usize,
    /// The application's view replaced the caller's reservation: it goes
    /// back to being one.
    reserved: bool,
}

impl Drop for UnmapOnError {
    fn drop(&mut self) {
        // SAFETY: the views were mapped by `Region::map` and were never handed out.
        unsafe {
            if self.reserved {
                sys::reserve_over(self.app, self.map_len);
            } else {
                sys::unmap(self.app, self.map_len);
            }
            if let Some(pager) = self.pager {
                sys::unmap(pager, self.map_len);
            }
        }
    }
}
