//! The pagepilot side: the same workload over a live pager region of the file.

use std::time::Instant;

use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, RegionStats};
use serde::Serialize;

use super::datafile::DataFile;
use super::measure::Measured;
use super::workload::{Cache, Plan, Workload};
use pagepilot_pager::sys;

/// Failure of a pagepilot run.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Mapping the region failed.
    #[error("mapping {path} with policy {policy}")]
    Map {
        /// The file.
        path: String,
        /// The policy asked for.
        policy: String,
        /// The pager's error.
        source: Box<pagepilot_pager::MapError>,
    },
    /// Unmapping failed.
    #[error("unmapping the region: {0}")]
    Unmap(pagepilot_pager::FlushError),
    /// `/proc/self/io` could not be read.
    #[error("reading /proc/self/io: {0}")]
    Io(std::io::Error),
    /// The workload read wrong data through the pager.
    #[error("pagepilot ({policy}) checksum {got} != expected {want}: wrong data paged in")]
    Checksum {
        /// The policy.
        policy: String,
        /// What it computed.
        got: u64,
        /// What it should have.
        want: u64,
    },
}

/// Checks that the pager accepts `policy` (by mapping one anonymous page with it), so that a
/// bad policy stops a benchmark before any measurement.
pub fn check_policy(policy: &str) -> Result<(), LiveError> {
    let region =
        Region::map_anon(sys::PAGE, sys::PAGE, policy).map_err(|source| LiveError::Map {
            path: "anonymous".into(),
            policy: policy.into(),
            source: Box::new(source),
        })?;
    region.unmap().map_err(LiveError::Unmap)
}

/// Pager options a benchmark may override (`None`: the pager's default).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Tuning {
    /// Largest read-ahead window along sequential faults, pages (1: off).
    pub readahead: Option<usize>,
    /// Pages read per fault outside a sequence.
    pub fault_around: Option<usize>,
    /// Fault-handler threads.
    pub handler_threads: Option<usize>,
    /// Prefetch the next read-ahead window while the application uses this one.
    pub async_readahead: Option<bool>,
    /// Prefetched windows kept ahead (reads in flight) with `async_readahead`.
    pub readahead_depth: Option<usize>,
    /// The faulting thread serves its own fault (SIGBUS) instead of handler threads.
    pub faulting_thread: bool,
}

/// Runs `w` over a read-only pagepilot region of `file` with `budget` bytes and `policy`, the
/// file's pages dropped from the page cache first.
pub fn run(
    file: &DataFile,
    budget: usize,
    policy: &str,
    tuning: Tuning,
    w: Workload,
) -> Result<Measured, LiveError> {
    let plan = Plan::new(w, file.len());
    run_with(file, budget, policy, tuning, &plan, Cache::Cold).map(|r| r.measured)
}

/// One run of [`run_with`].
pub struct LiveRun {
    /// What it measured.
    pub measured: Measured,
    /// The region's statistics just before its unmap.
    pub stats: RegionStats,
}

/// Runs `plan` over a pagepilot region of `file` (writable if the plan writes) with `budget`
/// bytes and `policy`. `cache`: cold drops the file's pages from the page cache first, warm
/// leaves what the caller put there. A writing plan's time includes the region's unmap, which
/// writes its dirty pages back (as the kernel's includes `msync` and `munmap`).
pub fn run_with(
    file: &DataFile,
    budget: usize,
    policy: &str,
    tuning: Tuning,
    plan: &Plan,
    cache: Cache,
) -> Result<LiveRun, LiveError> {
    let writes = plan.workload().writes();
    let backing = Backing::File {
        path: file.path().to_path_buf(),
        writable: writes,
    };
    let mut opts = RegionOptions::new(backing, budget, policy);
    if let Some(n) = tuning.readahead {
        opts = opts.with_readahead(n);
    }
    if let Some(n) = tuning.fault_around {
        opts = opts.with_fault_around(n);
    }
    if let Some(n) = tuning.handler_threads {
        opts = opts.with_handler_threads(n);
    }
    if let Some(on) = tuning.async_readahead {
        opts = opts.with_async_readahead(on);
    }
    if let Some(n) = tuning.readahead_depth {
        opts = opts.with_readahead_depth(n);
    }
    if tuning.faulting_thread {
        opts = opts.with_fault_service(FaultService::FaultingThread);
    }
    if cache == Cache::Cold {
        // Cold, as the kernel's runs start (they drop the page cache): a page
        // the cache still held would be read from it, not from the disk.
        crate::cold::make_cold(&[file.path()], false).map_err(LiveError::Io)?;
    }
    let region = Region::map(opts).map_err(|source| LiveError::Map {
        path: file.path().display().to_string(),
        policy: policy.into(),
        source: Box::new(source),
    })?;
    let read0 = super::measure::read_bytes_self().map_err(LiveError::Io)?;
    let cpu0 = pagepilot_pager::sys::cpu_us_self();
    let t0 = Instant::now();
    // SAFETY: the region stays mapped until `unmap` below, covers `len()` bytes of the file
    // written by `DataFile::create`, and is writable if the plan writes.
    let checksum = unsafe { plan.run(region.as_ptr()) };
    let mut elapsed_ns = t0.elapsed().as_nanos() as u64;
    let mut cpu_us = pagepilot_pager::sys::cpu_us_self() - cpu0;
    let stats = region.stats();
    if std::env::var_os("PAGEPILOT_BENCH_DEBUG").is_some() {
        eprintln!("{}", region.stats_json());
    }
    region.unmap().map_err(LiveError::Unmap)?;
    if writes {
        elapsed_ns = t0.elapsed().as_nanos() as u64;
        cpu_us = pagepilot_pager::sys::cpu_us_self() - cpu0;
    }
    let read1 = super::measure::read_bytes_self().map_err(LiveError::Io)?;
    let want = plan.expected();
    if checksum != want {
        return Err(LiveError::Checksum {
            policy: policy.into(),
            got: checksum,
            want,
        });
    }
    let measured = Measured {
        elapsed_ns,
        faults: stats.missing_faults,
        minor_faults: stats.minor_faults,
        bytes_read: read1 - read0,
        checksum,
        cgroup_baseline_bytes: 0,
        cpu_us,
    };
    Ok(LiveRun { measured, stats })
}
