//! A file taken over (its region, reaching past the file's end so that the
//! program's mappings can grow) and the program's windows into it: each of
//! the program's mappings of the file is the range of the region's view at
//! the mapping's file offset, so that every mapping of one file shares its
//! frames (two mappings see each other's stores at once) and the region's
//! pages nobody maps are inaccessible, as unmapped memory is.

use std::ffi::c_int;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use pagepilot_pager::Region;

use crate::fds::FileId;
use crate::log::Log;

/// The page size.
pub const PAGE: usize = 4096;

/// A file taken over.
pub struct TakenFile {
    /// Its identity.
    pub id: FileId,
    /// Its path, as the program's descriptor names it.
    pub path: String,
    /// The region paging it.
    pub region: Region,
    /// Whether the region may be written (the program opened it read-write).
    pub writable: bool,
    /// A descriptor of the file's own, for mappings handed to the kernel.
    pub fd: OwnedFd,
    /// Where the region's counts go at its end.
    pub log: Arc<Log>,
    /// The process that took it over (a child after `fork` has a copy).
    pub owner: u32,
    /// A private copy (`MAP_PRIVATE`) of one mapping's range: its region
    /// starts at that mapping's offset, and it is never written back.
    pub private: bool,
}

impl TakenFile {
    /// The address of the file's byte 0 in the region's view.
    pub fn base(&self) -> usize {
        self.region.as_ptr() as usize
    }

    /// Bytes of the region's view (whole pages).
    pub fn span(&self) -> usize {
        self.region.len().div_ceil(PAGE) * PAGE
    }
}

impl TakenFile {
    /// Logs the region's counts (in the process that took the file over:
    /// a child's copy counts nothing of its own).
    pub fn log_end(&self) {
        if std::process::id() != self.owner {
            return;
        }
        let s = self.region.stats();
        self.log.line(format_args!(
            "end {} faults={} pages_read={} pages_written={} minor_faults={} frames={} policy={}",
            self.path,
            s.fault_events,
            s.bytes_read / PAGE as u64,
            s.bytes_written / PAGE as u64,
            s.minor_faults,
            s.budget_frames,
            s.policy
        ));
    }
}

impl Drop for TakenFile {
    fn drop(&mut self) {
        self.log_end();
        // The region writes its dirty pages back as it drops (and says so
        // on stderr if one fails).
    }
}

/// One of the program's mappings of a taken-over file.
#[derive(Clone)]
pub struct Window {
    /// Its first byte.
    pub start: usize,
    /// Its length, whole pages.
    pub len: usize,
    /// The file offset of `start`.
    pub offset: u64,
    /// Its protection.
    pub prot: c_int,
    /// Whether it may become writable (`mprotect`): the program's
    /// descriptor was open for writing, or the mapping is private.
    pub may_write: bool,
    /// The file.
    pub file: Arc<TakenFile>,
}

impl Window {
    /// One past its last byte.
    pub fn end(&self) -> usize {
        self.start + self.len
    }

    /// Whether it overlaps `[a, b)`.
    pub fn overlaps(&self, a: usize, b: usize) -> bool {
        self.start < b && a < self.end()
    }
}

/// Splits the windows that straddle address `at`, so that every window
/// lies wholly on one side of it.
pub fn split_at(windows: &mut Vec<Window>, at: usize) {
    let mut extra = Vec::new();
    for w in windows.iter_mut() {
        if w.start < at && at < w.end() {
            let mut right = w.clone();
            right.start = at;
            right.len = w.end() - at;
            right.offset = w.offset + (at - w.start) as u64;
            w.len = at - w.start;
            extra.push(right);
        }
    }
    windows.extend(extra);
}

/// The protection page by page over `[a, b)` of `file`'s view: the union
/// of the windows' that cover the page, none where none does. Returned as
/// runs `(start, len, prot)`.
pub fn protections(
    windows: &[Window],
    file: &Arc<TakenFile>,
    a: usize,
    b: usize,
) -> Vec<(usize, usize, c_int)> {
    let (a, b) = (a.max(file.base()), b.min(file.base() + file.span()));
    let mine: Vec<&Window> = windows
        .iter()
        .filter(|w| Arc::ptr_eq(&w.file, file) && w.overlaps(a, b))
        .collect();
    let mut runs: Vec<(usize, usize, c_int)> = Vec::new();
    let mut at = a;
    while at < b {
        let prot = mine
            .iter()
            .filter(|w| w.start <= at && at < w.end())
            .fold(libc::PROT_NONE, |p, w| p | w.prot);
        match runs.last_mut() {
            Some(r) if r.2 == prot && r.0 + r.1 == at => r.1 += PAGE,
            _ => runs.push((at, PAGE, prot)),
        }
        at += PAGE;
    }
    runs
}
