//! The live pager: regions paged on userfaultfd under a frame budget and a
//! policy of the application's choice.
//!
//! A region's memory is a memfd. The application sees one shared mapping of
//! it, registered with userfaultfd for missing, minor and write-protect
//! faults; the pager holds a second mapping of the same memfd. A missing
//! fault reads the page(s) from the dataspace straight into the pager's view
//! and `UFFDIO_CONTINUE` maps them; reference bits are emulated by zapping
//! the application's PTE (the next access is a minor fault); dirty pages are
//! tracked by write-protect faults; eviction writes back dirty pages and
//! punches the frame out of the memfd. See `docs/pager.md`; exit, fork,
//! signals and a backing file that changes: `docs/lifecycle.md`.
//!
//! ```no_run
//! use pagepilot_pager::Region;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 64 MiB of anonymous memory paged under a 16 MiB budget by CLOCK.
//! let region = Region::map_anon(64 << 20, 16 << 20, "lru")?;
//! // SAFETY: the region is mapped for `region.len()` bytes.
//! unsafe { region.as_ptr().add(12345).write(7) };
//! println!("{}", region.stats_json());
//! region.unmap()?;
//! # Ok(())
//! # }
//! ```

mod around;
mod auto;
mod backing;
mod beside;
mod cgroup;
mod daemon;
mod dirty;
pub mod doctor;
mod error;
mod evict;
mod evictions;
mod fault;
mod frame_table;
mod guard;
mod handle;
mod lease;
mod lifecycle;
mod limit;
mod lock;
mod options;
mod pins;
mod policy_port;
mod pool;
mod prefetch;
mod read_job;
mod readahead;
mod readers;
mod region;
mod region_map;
mod region_state;
mod ring;
mod shared;
mod sharing;
mod sigbus;
mod source;
mod stats;
pub mod sys;
mod threads;
mod tuning;
mod victims;
mod views;
mod writeback;

pub use backing::{Attachment, Backing};
pub use cgroup::{fit_in, machine_memory, BudgetCut, MemoryCgroup};
pub use daemon::{Client, DaemonError, DAEMON_ENV, DAEMON_UID_ENV};
pub use error::{FailedPage, FlushError, MapError, PinError, PrefaultError};
pub use evictions::{Drained, Eviction};
pub use handle::{HandleError, ShareHandle, SharedMapping};
pub use lease::{ClaimError, Ticket};
pub use lifecycle::is_service_thread;
pub use options::JoinDaemon;
pub use pagepilot_dataspace as dataspace;
pub use pool::{Pool, PoolError, PoolStats};
pub use readahead::Advice;
pub use region::{FaultService, Region, RegionOptions};
pub use region_map::{region_map, Mapped};
pub use sharing::ShareError;
pub use stats::{LatencySummary, RegionStats};
pub use sys::UffdAccess;

/// The policy interface regions run (re-exported for [`Region::map_with_policy`]).
pub use pagepilot_frames as frames;
pub use pagepilot_policy as policy;

/// The page size regions are paged in.
pub const PAGE_SIZE: usize = sys::PAGE;
