//! A child's file, mapped by the kernel or by a pagepilot region, and what
//! it faulted so far.

use crate::error::IoContext;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use pagepilot_pager::{sys, Backing, Region, RegionOptions};

use super::job::{self, Mapping};
use crate::cgroup;

/// A mapped data file.
pub enum Mapped {
    /// The kernel's `MAP_SHARED` mapping of the file.
    Kernel(sys::Mapping),
    /// A pagepilot region.
    Region(Region),
}

impl Mapped {
    /// Maps `file` as `how` says, with `budget` bytes of frames (a kernel
    /// mapping: the process joins its cgroup, limited to the budget), one
    /// page read per fault.
    pub fn open(file: &Path, budget: u64, how: &Mapping) -> Result<Mapped, crate::BenchError> {
        match how {
            Mapping::Kernel { cgroup } => {
                cgroup::enter(cgroup, cgroup::Entry::AsIs)?;
                cgroup::limit_above_charged(cgroup, budget)?;
                crate::cold::make_cold(&[file], false).on("dropping the cached pages of", file)?;
                let f = std::fs::File::open(file).on("opening", file)?;
                let len = f.metadata().on("reading the size of", file)?.len() as usize;
                let map = sys::Mapping::shared(f.as_raw_fd(), len, false).on("mapping", file)?;
                map.advise_random().on("advising random access to", file)?;
                Ok(Mapped::Kernel(map))
            }
            Mapping::Pagepilot {
                limit,
                handlers,
                reserve,
            } => {
                let backing = Backing::File {
                    path: file.to_path_buf(),
                    writable: false,
                };
                let mut opts = RegionOptions::new(backing, budget as usize, "clock")
                    .with_fault_around(1)
                    .with_readahead(1);
                if *handlers > 0 {
                    opts = opts.with_handler_threads(*handlers);
                }
                if let Some((faults, period_ns)) = *limit {
                    opts = opts.with_fault_limit(faults, Duration::from_nanos(period_ns));
                }
                if *reserve > 0.0 {
                    opts = opts.with_reserve(*reserve);
                }
                Ok(Mapped::Region(Region::map(opts)?))
            }
        }
    }

    /// The mapping's first byte.
    pub fn ptr(&self) -> *const u8 {
        match self {
            Mapped::Kernel(m) => m.ptr(),
            Mapped::Region(r) => r.as_ptr(),
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Mapped::Kernel(m) => m.len(),
            Mapped::Region(r) => r.len(),
        }
    }

    /// Faults that went to the backing store so far: the region's fault
    /// events (what a fault limit counts), or the process's major faults.
    pub fn faults(&self) -> u64 {
        match self {
            Mapped::Kernel(..) => sys::faults_self().0,
            Mapped::Region(r) => r.stats().fault_events,
        }
    }

    /// Faults the region's fault limit postponed (0 for the kernel).
    pub fn postponed(&self) -> u64 {
        match self {
            Mapped::Kernel(..) => 0,
            Mapped::Region(r) => r.stats().postponed_faults,
        }
    }

    /// Pages resident now: the region's frames in use, or the process's
    /// mapped file pages (`RssFile`).
    pub fn resident_pages(&self) -> u64 {
        match self {
            Mapped::Kernel(..) => rss_file_kb().unwrap_or(0) / 4,
            Mapped::Region(r) => r.stats().frames_in_use,
        }
    }

    /// Reads the page number stored in page `page` (see `datafile`).
    ///
    /// # Safety
    /// `page` must lie inside the mapping.
    pub unsafe fn page_number(&self, page: usize) -> u64 {
        let at = page * sys::PAGE + job::PAGE_NUMBER_AT;
        // SAFETY: the caller keeps `page` inside the mapping, which is
        // readable and 8-byte aligned at this offset.
        unsafe { (self.ptr().add(at) as *const u64).read_volatile() }
    }

    /// Unmaps a region (reporting its errors); a kernel mapping just drops.
    pub fn close(self) -> Result<(), crate::BenchError> {
        if let Mapped::Region(r) = self {
            r.unmap()?;
        }
        Ok(())
    }
}

/// Messages this process sent the daemon, if it joined one
/// (`PAGEPILOT_DAEMON`); `None` otherwise.
pub fn daemon_messages() -> Option<u64> {
    pagepilot_pager::Client::current()
        .ok()
        .flatten()
        .map(|c| c.messages_sent())
}

/// `RssFile` of `/proc/self/status`, kB.
fn rss_file_kb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("RssFile:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
