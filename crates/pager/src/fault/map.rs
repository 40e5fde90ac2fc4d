//! Making pages visible to the application: UFFDIO_CONTINUE of pages in
//! the memfd, zero pages for anonymous memory never written out, and the
//! write-protect fault told apart from a race on an already mapped page.

use crate::engine::Shared;
use crate::resident::{MODIFIED, REFERENCED};
use crate::stats::Counters;
use crate::sys::{self, PAGE};

/// Maps a page that is in the memfd into the application's view.
pub(super) fn map(sh: &Shared, s: u32, n: usize, wp: bool) {
    let addr = sh.app_addr(s);
    if sh.uffd.continue_range(addr, n * PAGE, wp).is_err() {
        // Already mapped (another thread's fault on the same page was served
        // first): only the wake is missing. Pages after the first mapped one
        // stay unmapped and are mapped by their own (minor) fault.
        let _ = sh.uffd.wake(addr, n * PAGE);
    }
}

/// Maps a resident page for an access. If it is mapped already and this
/// is a write, the fault was a write-protect fault: un-protect the page.
pub(super) fn map_access(sh: &Shared, s: u32, write: bool, wp: bool) {
    let addr = sh.app_addr(s);
    match sh.uffd.continue_range(addr, PAGE, wp) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) && write && sh.writable => {
            Counters::add(&sh.stats.wp_faults, 1);
            if sh.uffd.writeprotect(addr, PAGE, false).is_err() {
                let _ = sh.uffd.wake(addr, PAGE);
            }
        }
        Err(_) => {
            let _ = sh.uffd.wake(addr, PAGE);
        }
    }
}

/// Maps pages `s..s + n` (absent from the memfd) as zero pages in one call:
/// writable for a write fault, else write-protected where dirty tracking is
/// on, so a later write to any of them is seen (a stream of reads then
/// writes pays one write-protect fault per page, as it did unclustered).
pub(super) fn map_zeros(sh: &Shared, s: u32, n: usize, write: bool) {
    let wp = sh.writable && !write;
    if sh.uffd.zero_range(sh.app_addr(s), n * PAGE, wp).is_err() {
        // Some page has a frame already (or the ioctl is unavailable): fill
        // the holes through the pager's view and map what is not mapped.
        let _ = sys::populate(sh.pager_addr(s) as usize, n * PAGE);
        map(sh, s, n, wp);
    }
}

/// The flags of a zero-filled page: referenced, and modified if the fault
/// was a write. A write fault's whole cluster is mapped writable, so every
/// page of it must count as modified (the stream is writing them): one
/// written back while still all zeros is correct, one written but thought
/// clean would be lost.
pub(super) fn zero_flags(write: bool) -> u8 {
    REFERENCED | if write { MODIFIED } else { 0 }
}
