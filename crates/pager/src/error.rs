//! Typed errors of mapping and flushing a region.

use std::io;
use std::path::PathBuf;

use pagepilot_policy::registry::RegistryError;
use thiserror::Error;

/// Why a region could not be mapped. Nothing is mapped when this is returned.
#[derive(Debug, Error)]
pub enum MapError {
    /// The fault limit was not admitted (RAPHA's admission control). The
    /// reason is in the message, not in `source()` (callers match on its
    /// text).
    #[error("the region's fault limit: {0}")]
    FaultLimit(pagepilot_frames::RateError),
    /// The pool could not guarantee the region's minimum (`min_frames`, or
    /// its budget). The reason is in the message, not in `source()`.
    #[error("the region's minimum in the pool: {0}")]
    Pool(pagepilot_frames::FrameError),
    /// The pagepilot daemon refused the region, or could not be reached.
    #[error(transparent)]
    Daemon(#[from] crate::DaemonError),
    /// The guaranteed minimum is above the budget.
    #[error(
        "min_frames of {min_frames} frames exceeds the budget of {budget_frames} frames: \
         the minimum is guaranteed, the budget is the most the region starts with"
    )]
    MinAboveBudget {
        /// The minimum asked for.
        min_frames: usize,
        /// The budget, frames.
        budget_frames: usize,
    },
    /// The backing file could not be opened.
    #[error("cannot open backing file {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// The backing file does not exist.
    #[error("backing file {0} does not exist")]
    MissingFile(PathBuf),
    /// The backing file is empty: there is nothing to map.
    #[error("backing file {0} is empty")]
    EmptyFile(PathBuf),
    /// The backing file is shorter than the length asked for.
    #[error("backing file {path} has {actual} bytes, {expected} were asked for")]
    ShortFile {
        /// The file.
        path: PathBuf,
        /// Its length.
        actual: u64,
        /// The length asked for in [`crate::RegionOptions::len`].
        expected: u64,
    },
    /// A writable mapping of a read-only file was asked for.
    #[error("backing file {0} is read-only but a writable mapping was asked for")]
    ReadOnly(PathBuf),
    /// The backing is not a regular file.
    #[error("backing {0} is not a regular file")]
    NotAFile(PathBuf),
    /// The length is zero or too large to page.
    #[error("region length {0} is invalid (must be 1 byte .. 2^32 pages)")]
    BadLength(usize),
    /// The budget is smaller than one page.
    #[error("budget of {budget} bytes is smaller than one page ({page} bytes)")]
    BudgetTooSmall {
        /// The budget given.
        budget: usize,
        /// The page size.
        page: usize,
    },
    /// An option is out of range.
    #[error("option `{name}`: {why}")]
    BadOption {
        /// The option.
        name: &'static str,
        /// What was wrong.
        why: String,
    },
    /// The policy spec was refused (unknown name, bad parameter, simulator-only).
    #[error("policy `{spec}`")]
    Policy {
        /// The spec given.
        spec: String,
        /// The registry's reason.
        source: RegistryError,
    },
    /// The dataspace's manager refused to open it (for a reason none of
    /// the variants above names).
    #[error(transparent)]
    Dataspace(#[from] pagepilot_dataspace::OpenError),
    /// An attached dataspace's manager refused to open it.
    #[error("attachment {index} ({manager} manager)")]
    Attach {
        /// Its place in the list of attachments.
        index: usize,
        /// The manager.
        manager: &'static str,
        /// Why.
        source: pagepilot_dataspace::OpenError,
    },
    /// The attachments do not make a region (overlapping, beyond their
    /// dataspaces, none at all, or mixing read-only and read-write).
    #[error("attached dataspaces: {0}")]
    Attachments(String),
    /// A pinned dataspace's pages could not be pinned (over the budget or
    /// the pin quota). The reason is in the message, not in `source()`.
    #[error("pinning the pinned dataspace's pages: {0}")]
    Pin(crate::PinError),
    /// The swap file for an anonymous region could not be created.
    #[error("cannot create swap file in {dir}")]
    Swap {
        /// The directory.
        dir: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// A system call of the userfaultfd set-up failed.
    #[error("{call} failed")]
    Sys {
        /// The call.
        call: &'static str,
        /// The system's reason.
        source: io::Error,
    },
    /// No userfaultfd could be opened: the three ways in, each with its
    /// answer and how to enable it.
    #[error(transparent)]
    Userfaultfd(#[from] crate::sys::OpenError),
    /// The kernel lacks a userfaultfd feature this pager needs.
    #[error("userfaultfd lacks {0} (needs Linux >= 6.6 with shmem minor faults)")]
    Unsupported(&'static str),
    /// Every slot of the faulting-thread service's region table is taken.
    #[error("more than {max} regions served in the faulting thread at once; unmap one or use handler threads")]
    FaultingThreadSlots {
        /// Regions served in the faulting thread at once, at most.
        max: usize,
    },
}

/// Why [`crate::Region::prefault`] refused a range.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PrefaultError {
    /// The range does not lie inside the region.
    #[error(
        "prefault of {len} bytes at offset {offset} is outside the region of {region_len} bytes"
    )]
    OutOfRange {
        /// Offset asked for.
        offset: usize,
        /// Length asked for.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
}

/// Why [`crate::Region::pin`] or [`crate::Region::unpin`] refused a range.
/// Nothing was pinned or unpinned when this is returned.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PinError {
    /// The range does not lie inside the region.
    #[error("pin of {len} bytes at offset {offset} is outside the region of {region_len} bytes")]
    OutOfRange {
        /// Offset asked for.
        offset: usize,
        /// Length asked for.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
    /// Pinning the range would leave no frame of the budget to serve a
    /// fault in.
    #[error(
        "pinning {new} more page(s) beside the {pinned} pinned would pass the budget of \
         {budget_frames} frames less one (a frame stays free to serve faults)"
    )]
    OverBudget {
        /// Pages of the range not pinned yet.
        new: usize,
        /// Pages pinned already.
        pinned: usize,
        /// The region's budget, frames.
        budget_frames: usize,
    },
    /// A page of the range cannot be brought in: it lies beyond the file's
    /// current end, or its read failed.
    #[error(
        "page {page} cannot be brought in to be pinned (beyond the file's end, or its read failed)"
    )]
    Unreadable {
        /// Page index in the region.
        page: usize,
    },
    /// The daemon refused the pin: beyond the user's pin quota
    /// (`ErrorCode::PinQuota`, `EDQUOT`), or beyond what the region holds
    /// of its `minFrame`.
    #[error("{message}")]
    Daemon {
        /// The errno a C caller gets (`EDQUOT` beyond the quota).
        errno: i32,
        /// The daemon's reason.
        message: String,
    },
    /// A page of the range to unpin is not pinned.
    #[error("page {page} is not pinned")]
    NotPinned {
        /// Page index in the region.
        page: usize,
    },
}

/// One page whose write-back failed; its data is still in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedPage {
    /// Page index in the region.
    pub page: u32,
    /// The errno of the failed write.
    pub errno: i32,
}

/// Why a flush (or an unmap's final flush) did not write everything back.
#[derive(Debug, Error)]
pub enum FlushError {
    /// Some dirty pages could not be written back; they stay in memory and
    /// dirty, and a later flush retries them.
    #[error("write-back of {} page(s) failed (first: page {}, errno {}); the data stays in memory", .pages.len(), .pages[0].page, .pages[0].errno)]
    WriteBack {
        /// The pages that could not be written, with the error of each.
        pages: Vec<FailedPage>,
    },
    /// Syncing the backing file failed.
    #[error("sync of the backing store failed: {0}")]
    Sync(io::Error),
}

// The fault limit's and the pool's refusals are shown in their variants'
// messages (callers match on that text), so they are not sources and the
// conversions are written out rather than derived with `#[from]`.
impl From<pagepilot_frames::RateError> for MapError {
    fn from(e: pagepilot_frames::RateError) -> MapError {
        MapError::FaultLimit(e)
    }
}

impl From<pagepilot_frames::FrameError> for MapError {
    fn from(e: pagepilot_frames::FrameError) -> MapError {
        MapError::Pool(e)
    }
}

/// The errno of a system error, `EIO` if it carries none.
fn os_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The errno of a dataspace manager's refusal to open a dataspace.
fn open_errno(e: &pagepilot_dataspace::OpenError) -> i32 {
    use pagepilot_dataspace::OpenError as O;
    match e {
        O::Busy(_) => libc::EBUSY,
        O::NoSuch(_) => libc::ENOENT,
        O::Io { source, .. } => os_errno(source),
        _ => libc::EINVAL,
    }
}

impl MapError {
    /// The errno a C caller of `pp_map*` finds in `errno`, and Python's
    /// `MapError.errno`: the system's where it said why, else the one
    /// nearest the refusal (`EINVAL` for a bad argument).
    pub fn errno(&self) -> i32 {
        match self {
            MapError::Open { source, .. }
            | MapError::Swap { source, .. }
            | MapError::Sys { source, .. } => os_errno(source),
            MapError::MissingFile(_) => libc::ENOENT,
            MapError::ReadOnly(_) => libc::EACCES,
            MapError::Daemon(d) => d.errno(),
            MapError::Pool(_) => libc::ENOMEM,
            MapError::Pin(p) => p.errno(),
            MapError::Dataspace(o) | MapError::Attach { source: o, .. } => open_errno(o),
            MapError::Userfaultfd(crate::sys::OpenError::Denied { syscall, .. }) => {
                syscall.raw_os_error().unwrap_or(libc::EPERM)
            }
            MapError::Userfaultfd(crate::sys::OpenError::Api(e)) => os_errno(e),
            MapError::Unsupported(_) => libc::ENOTSUP,
            MapError::FaultingThreadSlots { .. } => libc::EAGAIN,
            MapError::FaultLimit(_)
            | MapError::MinAboveBudget { .. }
            | MapError::EmptyFile(_)
            | MapError::ShortFile { .. }
            | MapError::NotAFile(_)
            | MapError::BadLength(_)
            | MapError::BudgetTooSmall { .. }
            | MapError::BadOption { .. }
            | MapError::Policy { .. }
            | MapError::Attachments(_) => libc::EINVAL,
        }
    }
}

impl PrefaultError {
    /// The errno of `pp_prefault`'s refusal (`ERANGE`: outside the region).
    pub fn errno(&self) -> i32 {
        match self {
            PrefaultError::OutOfRange { .. } => libc::ERANGE,
        }
    }
}

impl PinError {
    /// The errno a C caller of `pp_pin`/`pp_unpin` gets negated.
    pub fn errno(&self) -> i32 {
        match self {
            PinError::OutOfRange { .. } | PinError::NotPinned { .. } => libc::EINVAL,
            PinError::OverBudget { .. } => libc::ENOMEM,
            PinError::Unreadable { .. } => libc::EIO,
            PinError::Daemon { errno, .. } => *errno,
        }
    }
}

impl FlushError {
    /// The errno of a failed write-back (`pp_flush`, `pp_unmap`; Python's
    /// `FlushError.errno`): the first failed page's, or the sync's.
    pub fn errno(&self) -> i32 {
        match self {
            FlushError::WriteBack { pages } => pages.first().map_or(libc::EIO, |p| p.errno),
            FlushError::Sync(e) => os_errno(e),
        }
    }
}

impl crate::HandleError {
    /// The errno of a shared region's handle that could not be opened
    /// (Python's `MapError.errno` at unpickling).
    pub fn errno(&self) -> i32 {
        use crate::{ClaimError, HandleError as H};
        match self {
            H::Open { source, .. } | H::Map { source, .. } => os_errno(source),
            H::Lease(ClaimError::Io(e)) => os_errno(e),
            H::Lease(ClaimError::Used) => libc::EINVAL,
            H::Lease(ClaimError::Paged(_)) => libc::EBUSY,
        }
    }
}

impl PinError {
    pub(crate) fn from_daemon(e: crate::DaemonError) -> PinError {
        PinError::Daemon {
            errno: e.errno(),
            message: e.to_string(),
        }
    }
}
