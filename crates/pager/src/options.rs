//! How to map a region: backing, budget, policy and the pager's tuning.

use std::path::PathBuf;

use crate::backing::Backing;
use crate::error::MapError;
use crate::sys::PAGE;

/// Most handler threads per region.
const MAX_HANDLERS: usize = 64;
/// Most prefetched windows in flight (prefetcher threads) per region.
pub(crate) const MAX_PREFETCHERS: usize = 16;

/// Who serves a region's faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FaultService {
    /// `handler_threads` handler threads read fault events from the
    /// userfaultfd; the faulting thread sleeps until its page is mapped.
    /// Works for every access, including the kernel's (a `read(2)` into
    /// region memory).
    HandlerThreads,
    /// The default: one handler thread per CPU the mapping thread may run
    /// on (up to 4), each kept to its CPU; a fault wakes every idle handler,
    /// and the one on the faulting thread's CPU, woken without a cross-CPU
    /// wake-up, is the first to take it. On these virtual machines a
    /// cross-CPU wake-up of a halted vCPU costs the host a reschedule: a
    /// lone handler pays two per fault (16x the kernel's first touch, quiet
    /// machine), the CPU's own handler none (6x; docs/pager.md, "Who serves
    /// a fault by default"). Works for every access, like `HandlerThreads`
    /// (`handler_threads` is not used).
    #[default]
    HandlerPerCpu,
    /// The faulting thread serves its own fault in a SIGBUS handler
    /// (UFFD_FEATURE_SIGBUS): no thread hand-off. The kernel's own accesses
    /// to an unmapped region page fail with EFAULT instead of waiting.
    FaultingThread,
}

/// How to map a region. Build with [`RegionOptions::new`] and the `with_*`
/// methods, or set its public fields on [`RegionOptions::default`].
#[derive(Clone, Debug)]
pub struct RegionOptions {
    /// What the region is backed by.
    pub backing: Backing,
    /// The frame budget in bytes (rounded down to whole pages, at least one).
    pub budget_bytes: usize,
    /// A built-in policy spec (`lru`, `fifo`, `clock`, `mru`, `seq:L=20`, ...)
    /// or a policy program path.
    pub policy: String,
    /// For a file: the length to map; the file must be at least this long
    /// (unless `past_end`). `None` maps the whole file.
    pub len: Option<usize>,
    /// For a file: the region may reach past the file's end, as the
    /// kernel's mapping of a file may: a page wholly past the file's
    /// current end raises SIGBUS until the file grows (a `pwrite` beside
    /// the region, see [`crate::Region::write_beside`]).
    pub past_end: bool,
    /// Where to place the application's view, if that range is free (an
    /// address hint, as `mmap`'s; the pager's choice otherwise).
    pub app_address: Option<usize>,
    /// With `app_address`: the caller holds a reservation there (an
    /// anonymous mapping of exactly the view's length, e.g. `PROT_NONE`)
    /// that the view replaces, so nothing mapped meanwhile can take the
    /// range. If the region cannot be mapped, the range is left reserved
    /// (`PROT_NONE`) for the caller to release. Set it only through
    /// [`RegionOptions::with_app_reservation`], whose contract it is.
    pub(crate) app_address_reserved: bool,
    /// Pages read per missing fault outside a detected sequence (1: demand
    /// paging; 0, the default: sized by use, as the kernel's `mmap_miss`
    /// heuristic does: clusters of 32 pages, more while the application
    /// uses them, single pages once it does not; see docs/pager.md,
    /// "Read-around").
    pub fault_around_pages: usize,
    /// Largest read-ahead window along sequential faults, pages (1: off;
    /// 0, the default: chosen by the pager from the policy, the region's
    /// size and its budget, see docs/pager.md, "Defaults").
    pub readahead_max_pages: usize,
    /// Largest cluster of zero-filled pages along a stream of first touches
    /// (1: off). A missing fault on a page with nothing to read (anonymous
    /// memory never written out) that continues the previous zero fill fills
    /// and maps up to this many absent pages at once, the cluster doubling
    /// along the stream: one fault and one ioctl for several first touches,
    /// as the kernel's fault-around does. Outside a stream a first touch is
    /// filled alone. A write fault maps the cluster writable and dirty (the
    /// stream is writing it), a read fault write-protected (dirty tracking).
    pub zero_around_max_pages: usize,
    /// Fault-handler threads reading the region's userfaultfd, with
    /// [`FaultService::HandlerThreads`].
    pub handler_threads: usize,
    /// Directory for an anonymous region's swap file (default: the system temp dir).
    pub swap_dir: Option<PathBuf>,
    /// Whether a sequence of faults also starts reading the next windows in
    /// the background (on the io_uring, or by reader threads), so that I/O
    /// overlaps the application's use of the current one. On by default,
    /// where the default window has windows ahead (not for policy
    /// programs): the windows ahead cost an MRU-like policy (MRU, SEQ)
    /// (depth + 1) * k frames of its resident set, i.e. that many page-ins
    /// per pass of a cyclic scan (docs/pager.md, "Clustered reads"), which
    /// the default window keeps within 5% of the scan's own.
    pub async_readahead: bool,
    /// With `async_readahead`: how many prefetched windows are kept ahead of
    /// the application (several reads in flight), capped so that they fit in
    /// half the budget (0, the default: chosen with the window).
    pub readahead_depth: usize,
    /// Reader threads to which handler threads hand the reads of missing
    /// faults, so that one handler keeps several reads in flight (faults of
    /// several application threads). 0 (default): handlers read themselves.
    /// Not used when faults are served in the faulting thread. Fills then
    /// overlap, so a policy is asked for victims while other pages it was
    /// told about (HiPEC programs queue the incoming page at PageFault) are
    /// still being read: a program naming such a page is overruled.
    pub reader_threads: usize,
    /// Who serves faults: handler threads, or the faulting thread itself.
    pub fault_service: FaultService,
    /// With `async_readahead` and one handler thread: the handler reads the
    /// prefetched windows through an io_uring of its own, reaping a window
    /// when the application reaches it (no reader threads, no hand-off per
    /// window). On by default; off, or where io_uring is unavailable,
    /// reader threads read them.
    pub io_uring: bool,
    /// Microseconds a handler thread keeps polling for the next fault after
    /// serving one, before it sleeps (0: always sleep).
    pub handler_spin_us: u64,
    /// The pool the region's frames are drawn from (HiPEC's global frame
    /// manager). The region is guaranteed `min_frames` there (`minFrame`);
    /// it starts with up to `budget_bytes`, the frames above its minimum
    /// asked for with a `Request` when it is mapped and granted from the
    /// pool's free frames (fewer if fewer are free); its policy may request
    /// more, or release some. `None`: a budget of its own.
    pub pool: Option<crate::Pool>,
    /// In a pool: the region's guaranteed minimum, frames (HiPEC's
    /// `minFrame`; refused when the pool cannot hold it beside the other
    /// regions' minimums). 0, the default: the whole budget. At most the
    /// budget; only with a pool.
    pub min_frames: usize,
    /// RAPHA: the share of one processor the region reserves (its task's
    /// `pc`, in [0, 1]; 0, the default, reserves none). With a fault limit
    /// in a pool, admission control refuses the region when the reserves
    /// and the fault handling of every limit would pass the processor (Eq.
    /// 2), and the pool's system fault limit is what the reserves leave
    /// (Eq. 4). Only with a fault limit.
    pub reserve: f64,
    /// RAPHA's fault limit: at most this many missing faults per period;
    /// those beyond wait for the next period. In a pool, the pool's system
    /// limit bounds its limited regions together. `None`: no limit.
    pub fault_limit: Option<(u64, std::time::Duration)>,
    /// Whether the region draws its frames from the pagepilot daemon
    /// (outside a pool): the process's client by default.
    pub daemon: JoinDaemon,
}

/// Whether a region joins the pagepilot daemon.
#[derive(Clone, Debug, Default)]
pub enum JoinDaemon {
    /// The process's: the client [`crate::Client::connect`] made, or one
    /// connected to `$PAGEPILOT_DAEMON`; none without either.
    #[default]
    Process,
    /// This client's daemon.
    Client(crate::Client),
    /// Never: the budget is the region's own.
    Never,
}

impl JoinDaemon {
    /// The client the region joins through, connecting to
    /// `$PAGEPILOT_DAEMON` if the process has not yet.
    pub(crate) fn client(&self) -> Result<Option<crate::Client>, crate::DaemonError> {
        match self {
            JoinDaemon::Process => crate::daemon::default_client(),
            JoinDaemon::Client(c) => Ok(Some(c.clone())),
            JoinDaemon::Never => Ok(None),
        }
    }

    /// Whether the region would join a daemon (without connecting).
    fn likely(&self) -> bool {
        match self {
            JoinDaemon::Process => crate::daemon::joining(),
            JoinDaemon::Client(_) => true,
            JoinDaemon::Never => false,
        }
    }
}

impl Default for RegionOptions {
    fn default() -> Self {
        RegionOptions {
            backing: Backing::Anonymous { len: 0 },
            budget_bytes: 0,
            policy: "clock".into(),
            len: None,
            past_end: false,
            app_address: None,
            app_address_reserved: false,
            fault_around_pages: 0,
            readahead_max_pages: 0,
            zero_around_max_pages: 16,
            handler_threads: 1,
            swap_dir: None,
            pool: None,
            min_frames: 0,
            reserve: 0.0,
            fault_limit: None,
            daemon: JoinDaemon::Process,
            handler_spin_us: 0,
            fault_service: FaultService::HandlerPerCpu,
            async_readahead: true,
            readahead_depth: 0,
            reader_threads: 0,
            io_uring: true,
        }
    }
}

impl RegionOptions {
    /// Refuses options out of range, naming the option (the backing and the
    /// policy are checked when they are opened and built).
    pub(crate) fn check(&self) -> Result<(), MapError> {
        if self.budget_bytes < PAGE {
            return Err(MapError::BudgetTooSmall {
                budget: self.budget_bytes,
                page: PAGE,
            });
        }
        let bad = |name, value: usize, range: &str| MapError::BadOption {
            name,
            why: format!("{value} is not in {range}"),
        };
        if self.handler_threads == 0 || self.handler_threads > MAX_HANDLERS {
            let range = format!("1..={MAX_HANDLERS}");
            return Err(bad("handler_threads", self.handler_threads, &range));
        }
        let range = format!("0..={MAX_PREFETCHERS}");
        if self.reader_threads > MAX_PREFETCHERS {
            return Err(bad("reader_threads", self.reader_threads, &range));
        }
        if self.readahead_depth > MAX_PREFETCHERS {
            return Err(bad("readahead_depth", self.readahead_depth, &range));
        }
        let budget = self.budget_bytes / PAGE;
        if self.min_frames > budget {
            return Err(MapError::MinAboveBudget {
                min_frames: self.min_frames,
                budget_frames: budget,
            });
        }
        if self.min_frames > 0 && self.pool.is_none() && !self.daemon.likely() {
            return Err(MapError::BadOption {
                name: "min_frames",
                why: "a guaranteed minimum needs a pool or the daemon to draw frames from".into(),
            });
        }
        if !(0.0..=1.0).contains(&self.reserve) {
            return Err(MapError::BadOption {
                name: "reserve",
                why: format!("{} is not a share of one processor in [0, 1]", self.reserve),
            });
        }
        if self.reserve > 0.0 && self.fault_limit.is_none() {
            return Err(MapError::BadOption {
                name: "reserve",
                why: "a processor reserve is admitted with a fault limit (RAPHA)".into(),
            });
        }
        if let Some((faults, period)) = self.fault_limit {
            if faults == 0 || period.is_zero() {
                return Err(MapError::BadOption {
                    name: "fault_limit",
                    why: format!(
                        "{faults} faults per {period:?}: both the count and the period must be positive"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Options with defaults for everything but backing, budget and policy.
    pub fn new(backing: Backing, budget_bytes: usize, policy: &str) -> Self {
        RegionOptions {
            backing,
            budget_bytes,
            policy: policy.into(),
            ..RegionOptions::default()
        }
    }
    /// Sets [`RegionOptions::fault_around_pages`].
    pub fn with_fault_around(mut self, pages: usize) -> Self {
        self.fault_around_pages = pages;
        self
    }
    /// Sets [`RegionOptions::readahead_max_pages`].
    pub fn with_readahead(mut self, pages: usize) -> Self {
        self.readahead_max_pages = pages;
        self
    }
    /// Sets [`RegionOptions::zero_around_max_pages`].
    pub fn with_zero_around(mut self, pages: usize) -> Self {
        self.zero_around_max_pages = pages;
        self
    }
    /// Sets [`RegionOptions::handler_threads`], served by that many handler
    /// threads ([`FaultService::HandlerThreads`]).
    pub fn with_handler_threads(mut self, n: usize) -> Self {
        self.handler_threads = n;
        self.fault_service = FaultService::HandlerThreads;
        self
    }
    /// Draws the region's frames from `pool` ([`RegionOptions::pool`]).
    pub fn with_pool(mut self, pool: &crate::Pool) -> Self {
        self.pool = Some(pool.clone());
        self
    }
    /// Draws the region's frames from `client`'s daemon
    /// ([`RegionOptions::daemon`]).
    pub fn with_daemon(mut self, client: &crate::Client) -> Self {
        self.daemon = JoinDaemon::Client(client.clone());
        self
    }

    /// Keeps the region out of the daemon, whatever the process joined:
    /// its budget is its own.
    pub fn without_daemon(mut self) -> Self {
        self.daemon = JoinDaemon::Never;
        self
    }

    /// Sets [`RegionOptions::min_frames`]: the frames guaranteed in the
    /// pool, or by the daemon.
    pub fn with_min_frames(mut self, frames: usize) -> Self {
        self.min_frames = frames;
        self
    }
    /// Sets [`RegionOptions::reserve`]: the share of one processor reserved.
    pub fn with_reserve(mut self, pc: f64) -> Self {
        self.reserve = pc;
        self
    }
    /// Sets [`RegionOptions::fault_limit`]: `faults` per `period`.
    pub fn with_fault_limit(mut self, faults: u64, period: std::time::Duration) -> Self {
        self.fault_limit = Some((faults, period));
        self
    }
    /// Sets [`RegionOptions::swap_dir`].
    pub fn with_swap_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.swap_dir = Some(dir.into());
        self
    }
    /// Sets [`RegionOptions::handler_spin_us`].
    pub fn with_handler_spin(mut self, us: u64) -> Self {
        self.handler_spin_us = us;
        self
    }
    /// Sets [`RegionOptions::async_readahead`].
    pub fn with_async_readahead(mut self, on: bool) -> Self {
        self.async_readahead = on;
        self
    }
    /// Sets [`RegionOptions::readahead_depth`].
    pub fn with_readahead_depth(mut self, windows: usize) -> Self {
        self.readahead_depth = windows;
        self
    }
    /// Sets [`RegionOptions::reader_threads`].
    pub fn with_reader_threads(mut self, n: usize) -> Self {
        self.reader_threads = n;
        self
    }
    /// Sets [`RegionOptions::fault_service`].
    pub fn with_fault_service(mut self, service: FaultService) -> Self {
        self.fault_service = service;
        self
    }
    /// Sets [`RegionOptions::io_uring`].
    pub fn with_io_uring(mut self, on: bool) -> Self {
        self.io_uring = on;
        self
    }
    /// Sets [`RegionOptions::len`].
    pub fn with_len(mut self, len: usize) -> Self {
        self.len = Some(len);
        self
    }
    /// Sets [`RegionOptions::app_address`].
    pub fn with_app_address(mut self, at: usize) -> Self {
        self.app_address = Some(at);
        self
    }
    /// Sets [`RegionOptions::app_address`] to a range the caller reserved
    /// ([`RegionOptions::app_address_reserved`]).
    ///
    /// # Safety
    /// `[at, at + the view's length)` must be a mapping of the caller's
    /// own that nothing uses: the region's view replaces it (`MAP_FIXED`).
    pub unsafe fn with_app_reservation(mut self, at: usize) -> Self {
        self.app_address = Some(at);
        self.app_address_reserved = true;
        self
    }
    /// Sets [`RegionOptions::past_end`].
    pub fn with_past_end(mut self, on: bool) -> Self {
        self.past_end = on;
        self
    }
}
