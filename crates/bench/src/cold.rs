//! The one way a run starts cold: the data files' pages out of the page cache, so that a
//! page the cache still held is not counted as read from the disk.

use std::io;
use std::path::Path;

use pagepilot_pager::sys;

/// Drops the cached pages of `files` (`POSIX_FADV_DONTNEED`, open to any user: clean,
/// unmapped pages), and with `whole_cache` (root) the whole page cache after a sync, which
/// also takes what other files would have read around them.
pub fn make_cold(files: &[&Path], whole_cache: bool) -> io::Result<()> {
    for f in files {
        sys::fadvise_dontneed(&std::fs::File::open(f)?)?;
    }
    if whole_cache {
        sys::drop_page_cache()?;
    }
    Ok(())
}
